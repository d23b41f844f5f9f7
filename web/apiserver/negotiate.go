package apiserver

import (
	"mime"
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// restriction says which conversions (as=...;g=...;v=...) an endpoint can
// produce, like negotiation.EndpointRestrictions upstream.
type restriction int

const (
	// restrictDefault allows no conversion (DefaultEndpointRestrictions);
	// errors and discovery documents are written with it.
	restrictDefault restriction = iota
	// restrictResource is a resource endpoint (RequestScope): Table for JSON
	// and YAML, PartialObjectMetadata[List] for any media type.
	restrictResource
	// restrictDiscovery accepts only aggregated discovery
	// (DiscoveryEndpointRestrictions).
	restrictDiscovery
)

func (r restriction) allowsTransform(info *runtime.SerializerInfo, target *schema.GroupVersionKind) bool {
	switch r {
	case restrictResource:
		if target == nil {
			return true
		}
		if target.Group != metav1.GroupName || (target.Version != "v1" && target.Version != "v1beta1") {
			return false
		}
		switch target.Kind {
		case "Table":
			return info.MediaTypeType == "application" && (info.MediaTypeSubType == "json" || info.MediaTypeSubType == "yaml")
		case "PartialObjectMetadata", "PartialObjectMetadataList":
			return true
		}
		return false
	case restrictDiscovery:
		return isAggregatedDiscovery(target)
	}
	return target == nil
}

// allowsServerVersion mirrors RequestScope.AllowsServerVersion (the meta
// group version); the default restrictions allow none.
func (r restriction) allowsServerVersion(v string) bool {
	return r == restrictResource && v == "v1"
}

func isAggregatedDiscovery(gvk *schema.GroupVersionKind) bool {
	return gvk != nil && gvk.Group == "apidiscovery.k8s.io" && gvk.Kind == "APIGroupDiscoveryList" &&
		(gvk.Version == "v2" || gvk.Version == "v2beta1")
}

// mediaOptions is the outcome of output negotiation
// (negotiation.MediaTypeOptions).
type mediaOptions struct {
	info    *runtime.SerializerInfo
	convert *schema.GroupVersionKind
	pretty  bool // pretty=1 media type parameter
}

// negotiateMediaType picks the first Accept clause (by q) that one of the
// serializers supports and the endpoint allows
// (negotiation.NegotiateMediaTypeOptions). An empty header means the first
// serializer.
func negotiateMediaType(header string, infos []runtime.SerializerInfo, r restriction, stream bool) (mediaOptions, bool) {
	if header == "" {
		if r == restrictDiscovery {
			return mediaOptions{}, false
		}
		if stream {
			return mediaOptions{info: &infos[0]}, infos[0].StreamSerializer != nil
		}
		return mediaOptions{info: &infos[0]}, true
	}
	// Fast path for the headers client-go and kubectl send most, which
	// need no parsing beyond a comparison.
	if r != restrictDiscovery && (header == "application/json" || header == "application/vnd.kubernetes.protobuf,application/json" || header == "application/vnd.kubernetes.protobuf, application/json") {
		want := "application/json"
		if header[12] == 'v' {
			want = "application/vnd.kubernetes.protobuf"
		}
		for i := range infos {
			if infos[i].MediaType == want {
				return mediaOptions{info: &infos[i]}, true
			}
		}
	}
	for _, c := range parseAccept(header) {
		for i := range infos {
			info := &infos[i]
			if !(c.typ == "*" && c.sub == "*") &&
				!(c.typ == info.MediaTypeType && (c.sub == "*" || c.sub == info.MediaTypeSubType)) {
				continue
			}
			if o, ok := acceptOptions(c.params, info, r); ok {
				if stream && info.StreamSerializer == nil {
					// NegotiateOutputMediaTypeStream fails rather than
					// trying the next clause.
					return o, false
				}
				return o, true
			}
		}
	}
	return mediaOptions{}, false
}

// acceptOptions interprets the parameters of one clause
// (negotiation.acceptMediaTypeOptions).
func acceptOptions(params []param, info *runtime.SerializerInfo, r restriction) (mediaOptions, bool) {
	o := mediaOptions{info: info}
	for _, p := range params {
		switch p.key {
		case "as", "g", "v":
			if o.convert == nil {
				o.convert = &schema.GroupVersionKind{}
			}
			switch p.key {
			case "as":
				o.convert.Kind = p.value
			case "g":
				o.convert.Group = p.value
			default:
				o.convert.Version = p.value
			}
		case "stream":
			if p.value != "" && (info.StreamSerializer == nil || p.value != "watch") {
				return mediaOptions{}, false
			}
		case "sv":
			if p.value != "" && !r.allowsServerVersion(p.value) {
				return mediaOptions{}, false
			}
		case "pretty":
			o.pretty = p.value == "1"
		}
	}
	if !r.allowsTransform(info, o.convert) {
		return mediaOptions{}, false
	}
	return o, true
}

// mediaTypeNames lists the serializers' media types, and with stream their
// ";stream=watch" forms (negotiation.MediaTypesForSerializer).
func mediaTypeNames(infos []runtime.SerializerInfo, stream bool) []string {
	var out []string
	for _, info := range infos {
		if !stream {
			out = append(out, info.MediaType)
		} else if info.StreamSerializer != nil {
			out = append(out, info.MediaType+";stream=watch")
		}
	}
	return out
}

// inputSerializer finds the serializer for a request body's Content-Type;
// an empty type means JSON (negotiation.NegotiateInputSerializer).
func inputSerializer(contentType string, infos []runtime.SerializerInfo) (*runtime.SerializerInfo, bool) {
	if contentType == "" {
		return &infos[0], true
	}
	for i := range infos {
		if infos[i].MediaType == contentType {
			return &infos[i], true
		}
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, false
	}
	for i := range infos {
		if infos[i].MediaType == mt {
			return &infos[i], true
		}
	}
	return nil, false
}

// plainJSON reports whether a response in mo is plain application/json:
// not indented, no Table or PartialObjectMetadata conversion. engine
// renders such bodies itself for the kinds it has a codec for
// (engine.EncodeJSON, GetJSON, ListJSON).
func plainJSON(mo mediaOptions, pretty bool) bool {
	return !pretty && mo.convert == nil && mo.info.MediaType == "application/json"
}

// isPrettyPrint reports the legacy pretty rules: ?pretty=<bool>, else a
// User-Agent of curl, Wget or a browser (negotiation.isPrettyPrint).
func isPrettyPrint(rc *fasthttp.RequestCtx) bool {
	if args := rc.QueryArgs(); args.Len() > 0 {
		if pp := args.Peek("pretty"); len(pp) > 0 {
			pretty, _ := strconv.ParseBool(string(pp))
			return pretty
		}
	}
	ua := b2s(rc.Request.Header.UserAgent())
	return strings.HasPrefix(ua, "curl") || strings.HasPrefix(ua, "Wget") || strings.HasPrefix(ua, "Mozilla/5.0")
}

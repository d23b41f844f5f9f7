package apiserver

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"

	"github.com/valyala/fasthttp"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apidiscoveryv2beta1 "k8s.io/api/apidiscovery/v2beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/version"

	"github.com/leasehold/leasehold/engine"
)

// discovery holds the discovery documents, built once: the served
// resources never change while the server runs.
type discovery struct {
	groupList     *metav1.APIGroupList
	groups        map[string]*metav1.APIGroup
	resourceLists map[string]*metav1.APIResourceList // by "group/version"
	// Aggregated documents for /apis and /api (empty: no core group).
	apis, api aggregated
	infos     []runtime.SerializerInfo
}

// aggregated is one aggregated discovery document in both versions.
type aggregated struct {
	v2           *apidiscoveryv2.APIGroupDiscoveryList
	v2beta1      *apidiscoveryv2beta1.APIGroupDiscoveryList
	etag, etagB1 string
}

// discoveryCodecs encode the apidiscovery.k8s.io types, which engine's
// scheme does not know.
var discoveryCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{apidiscoveryv2.AddToScheme, apidiscoveryv2beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return serializer.NewCodecFactory(s)
}()

// sortVersions orders versions by kube-aware priority (v1 > v1beta1 >
// v1alpha2), as group discovery lists them.
func sortVersions(vs []string) {
	sort.SliceStable(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i], vs[j]) > 0 })
}

// storageVersionHash is discovery's hash of a resource's storage version
// (endpoints/discovery/storageversionhash.go).
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

func newDiscovery(resources []*engine.Resource, groups map[string]*group) (*discovery, error) {
	d := &discovery{
		groupList:     &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: []metav1.APIGroup{}},
		groups:        map[string]*metav1.APIGroup{},
		resourceLists: map[string]*metav1.APIResourceList{},
		infos:         discoveryCodecs.SupportedMediaTypes(),
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return groupBefore(names[i], names[j]) })
	v2 := &apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{}}
	legacy := &apidiscoveryv2.APIGroupDiscoveryList{Items: []apidiscoveryv2.APIGroupDiscovery{}}
	for _, name := range names {
		g := groups[name]
		ag := metav1.APIGroup{Name: name}
		dg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: name}}
		for _, v := range g.versions {
			gv := groupVersionKey(name, v)
			ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v})
			list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: []metav1.APIResource{}}
			if name == "" {
				// Upstream writes the core group's list without apiVersion,
				// as it writes APIVersions.
				list.APIVersion = ""
			}
			dv := apidiscoveryv2.APIVersionDiscovery{Version: v, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent}
			for _, r := range resourcesIn(resources, name, v) {
				ar := metav1.APIResource{
					Name:         r.Plural,
					SingularName: r.Singular,
					Namespaced:   r.Namespaced,
					Kind:         r.Kind,
					Verbs:        r.Verbs,
					ShortNames:   r.ShortNames,
					Categories:   r.Categories,
				}
				if r.StorageVersion != "" { // the reviews are never stored
					ar.StorageVersionHash = storageVersionHash(r.StorageGroup, r.StorageVersion, r.Kind)
				}
				list.APIResources = append(list.APIResources, ar)
				var subs []apidiscoveryv2.APISubresourceDiscovery
				for _, s := range r.Subresources {
					list.APIResources = append(list.APIResources, metav1.APIResource{
						Name: r.Plural + "/" + s.Name, Namespaced: r.Namespaced, Kind: r.Kind, Verbs: s.Verbs,
					})
					subs = append(subs, apidiscoveryv2.APISubresourceDiscovery{
						Subresource: s.Name, ResponseKind: &metav1.GroupVersionKind{Kind: r.Kind}, Verbs: s.Verbs,
					})
				}
				scope := apidiscoveryv2.ScopeCluster
				if r.Namespaced {
					scope = apidiscoveryv2.ScopeNamespace
				}
				dv.Resources = append(dv.Resources, apidiscoveryv2.APIResourceDiscovery{
					Resource:         r.Plural,
					ResponseKind:     &metav1.GroupVersionKind{Kind: r.Kind},
					Scope:            scope,
					SingularResource: r.Singular,
					Verbs:            r.Verbs,
					ShortNames:       r.ShortNames,
					Categories:       r.Categories,
					Subresources:     subs,
				})
			}
			d.resourceLists[gv] = list
			dg.Versions = append(dg.Versions, dv)
		}
		if name == "" {
			// The core group is served at /api, and only there.
			legacy.Items = append(legacy.Items, dg)
			continue
		}
		ag.PreferredVersion = ag.Versions[0]
		d.groupList.Groups = append(d.groupList.Groups, ag)
		one := ag
		one.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
		d.groups[name] = &one
		v2.Items = append(v2.Items, dg)
	}
	var err error
	if d.apis, err = newAggregated(v2); err != nil {
		return nil, err
	}
	if d.api, err = newAggregated(legacy); err != nil {
		return nil, err
	}
	return d, nil
}

// upstreamGroupOrder is the order of kube-apiserver v1.37's /apis (its
// aggregator's group priorities, highest first), which both discovery
// documents follow; a group not in it comes after, by name.
var upstreamGroupOrder = []string{
	"", "apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io",
	"authorization.k8s.io", "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io",
	"policy", "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io",
	"apiextensions.k8s.io", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io",
	"discovery.k8s.io", "resource.k8s.io", "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io",
}

func groupBefore(a, b string) bool {
	ia, ib := slices.Index(upstreamGroupOrder, a), slices.Index(upstreamGroupOrder, b)
	switch {
	case ia >= 0 && ib >= 0:
		return ia < ib
	case ia >= 0 || ib >= 0:
		return ia >= 0
	}
	return a < b
}

// groupVersionKey is how discovery writes a group version: "v1" for the
// core group, "<group>/<version>" for the others.
func groupVersionKey(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// resourcesIn lists the resources served in group/version by name.
func resourcesIn(resources []*engine.Resource, group, version string) []*engine.Resource {
	var out []*engine.Resource
	for _, r := range resources {
		if _, ok := r.ServedVersion(version); ok && r.Group == group {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Plural < out[j].Plural })
	return out
}

// newAggregated completes a v2 document, derives v2beta1 and the ETags
// (sha512 of the JSON, as aggregated/etag.go computes them).
func newAggregated(v2 *apidiscoveryv2.APIGroupDiscoveryList) (aggregated, error) {
	v2.TypeMeta = metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}
	b1 := &apidiscoveryv2beta1.APIGroupDiscoveryList{}
	raw, err := json.Marshal(v2)
	if err != nil {
		return aggregated{}, fmt.Errorf("encoding aggregated discovery: %w", err)
	}
	// The two versions have the same shape.
	if err := json.Unmarshal(raw, b1); err != nil {
		return aggregated{}, fmt.Errorf("converting aggregated discovery: %w", err)
	}
	b1.TypeMeta = metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2beta1"}
	rawB1, err := json.Marshal(b1)
	if err != nil {
		return aggregated{}, fmt.Errorf("encoding aggregated discovery: %w", err)
	}
	return aggregated{
		v2: v2, v2beta1: b1,
		etag:   fmt.Sprintf("%X", sha512.Sum512(raw)),
		etagB1: fmt.Sprintf("%X", sha512.Sum512(rawB1)),
	}, nil
}

// serveLegacyRoot serves /api: aggregated discovery when asked for, else
// APIVersions listing the core group's versions.
func (h *Handler) serveLegacyRoot(rc *fasthttp.RequestCtx) {
	if h.serveAggregated(rc, &h.disc.api) {
		return
	}
	// Upstream writes APIVersions without apiVersion.
	obj := &metav1.APIVersions{
		TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
		Versions: h.groups[""].versions,
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{
			ClientCIDR: "0.0.0.0/0", ServerAddress: rc.LocalAddr().String(),
		}},
	}
	h.writeUnversioned(rc, obj)
}

// serveAPIs serves /apis.
func (h *Handler) serveAPIs(rc *fasthttp.RequestCtx) {
	if h.serveAggregated(rc, &h.disc.apis) {
		return
	}
	h.writeUnversioned(rc, h.disc.groupList)
}

// serveGroup serves /apis/<group>.
func (h *Handler) serveGroup(rc *fasthttp.RequestCtx, g *group) {
	if !rc.IsGet() {
		h.writeError(rc, errMethodNotAllowed)
		return
	}
	h.writeUnversioned(rc, h.disc.groups[g.name])
}

// serveResourceList serves /apis/<group>/<version>.
func (h *Handler) serveResourceList(rc *fasthttp.RequestCtx, g *group, version string) {
	if !rc.IsGet() {
		h.writeError(rc, errMethodNotAllowed)
		return
	}
	h.writeUnversioned(rc, h.disc.resourceLists[groupVersionKey(g.name, version)])
}

// writeUnversioned writes a discovery object exactly as built (its
// TypeMeta included) with the negotiated serializer.
func (h *Handler) writeUnversioned(rc *fasthttp.RequestCtx, obj runtime.Object) {
	mo, ok := negotiateMediaType(b2s(rc.Request.Header.Peek("Accept")), h.infos, restrictDefault, false)
	if !ok {
		h.writeObject(rc, restrictDefault, http.StatusOK, obj, statusGV, mo, false)
		return
	}
	s := mo.info.Serializer
	if (mo.pretty || isPrettyPrint(rc)) && mo.info.PrettySerializer != nil {
		s = mo.info.PrettySerializer
	}
	rc.SetContentType(mo.info.MediaType)
	rc.SetStatusCode(http.StatusOK)
	if err := s.Encode(obj, rc.Response.BodyWriter()); err != nil {
		rc.Response.ResetBody()
		h.writeError(rc, fmt.Errorf("encoding %T: %w", obj, err))
	}
}

// serveAggregated answers with aggregated discovery when the Accept header
// asks for it (aggregated.WrappedHandler), with ETag and 304 support.
func (h *Handler) serveAggregated(rc *fasthttp.RequestCtx, doc *aggregated) bool {
	mo, ok := negotiateMediaType(b2s(rc.Request.Header.Peek("Accept")), h.disc.infos, restrictDiscovery, false)
	if !ok || !isAggregatedDiscovery(mo.convert) {
		return false
	}
	var obj runtime.Object = doc.v2
	etag := doc.etag
	if mo.convert.Version == "v2beta1" {
		obj, etag = doc.v2beta1, doc.etagB1
	}
	quoted := strconv.Quote(etag)
	hdr := &rc.Response.Header
	hdr.Set("ETag", quoted)
	hdr.Set("Vary", "Accept")
	hdr.Set("Cache-Control", "public")
	if string(rc.Request.Header.Peek("If-None-Match")) == quoted {
		rc.SetStatusCode(http.StatusNotModified)
		return true
	}
	s := mo.info.Serializer
	if (mo.pretty || isPrettyPrint(rc)) && mo.info.PrettySerializer != nil {
		s = mo.info.PrettySerializer
	}
	rc.SetContentType(mo.info.MediaType + ";g=apidiscovery.k8s.io;v=" + mo.convert.Version + ";as=APIGroupDiscoveryList")
	rc.SetStatusCode(http.StatusOK)
	if err := s.Encode(obj, rc.Response.BodyWriter()); err != nil {
		rc.Response.ResetBody()
		h.writeError(rc, fmt.Errorf("encoding aggregated discovery: %w", err))
	}
	return true
}

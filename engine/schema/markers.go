package schema

import (
	"reflect"

	"k8s.io/kube-openapi/pkg/validation/spec"
)

// What openapi-gen reads from comment markers, which reflection cannot see.
// Keys are "<definition name>.<json field name>". Only the types leasehold
// serves (and what they reference) are listed; the values are upstream's
// markers in k8s.io/apimachinery/pkg/apis/meta/v1/types.go.
const metaV1 = "io.k8s.apimachinery.pkg.apis.meta.v1."

var listTypes = map[string]string{
	metaV1 + "ObjectMeta.ownerReferences":             "map",
	metaV1 + "ObjectMeta.finalizers":                  "set",
	metaV1 + "ObjectMeta.managedFields":               "atomic",
	metaV1 + "DeleteOptions.dryRun":                   "atomic",
	metaV1 + "StatusDetails.causes":                   "atomic",
	metaV1 + "APIResource.shortNames":                 "atomic",
	metaV1 + "APIResource.categories":                 "atomic",
	metaV1 + "APIResourceList.resources":              "atomic",
	metaV1 + "APIGroup.versions":                      "atomic",
	metaV1 + "APIGroup.serverAddressByClientCIDRs":    "atomic",
	metaV1 + "APIGroupList.groups":                    "atomic",
	metaV1 + "APIVersions.versions":                   "atomic",
	metaV1 + "APIVersions.serverAddressByClientCIDRs": "atomic",
	metaV1 + "LabelSelector.matchExpressions":         "atomic",
	metaV1 + "LabelSelectorRequirement.values":        "atomic",
	metaV1 + "FieldSelectorRequirement.values":        "atomic",
	metaV1 + "RootPaths.paths":                        "atomic",
	metaV1 + "Table.columnDefinitions":                "atomic",
	metaV1 + "Table.rows":                             "atomic",
	metaV1 + "TableRow.cells":                         "atomic",
	metaV1 + "TableRow.conditions":                    "atomic",
	metaV1 + "PartialObjectMetadataList.items":        "atomic",
	metaV1 + "CreateOptions.dryRun":                   "atomic",
	metaV1 + "PatchOptions.dryRun":                    "atomic",
	metaV1 + "UpdateOptions.dryRun":                   "atomic",
	metaV1 + "ApplyOptions.dryRun":                    "atomic",
	coreV1 + "NamespaceSpec.finalizers":               "atomic",
	coreV1 + "NamespaceStatus.conditions":             "map",
	authzV1 + "FieldSelectorAttributes.requirements":  "atomic",
	authzV1 + "LabelSelectorAttributes.requirements":  "atomic",
}

// authzV1 is the prefix of k8s.io/api/authorization/v1 (the
// SelfSubjectAccessReview, for its managedFields only).
const authzV1 = "io.k8s.api.authorization.v1."

// coreV1 is the definition prefix of k8s.io/api/core/v1 (Namespace, Event
// and what they reference); the markers are upstream's in its types.go.
const coreV1 = "io.k8s.api.core.v1."

// listMapKeys are the +listMapKey markers of list-type "map" fields.
var listMapKeys = map[string][]interface{}{
	metaV1 + "ObjectMeta.ownerReferences": {"uid"},
	coreV1 + "NamespaceStatus.conditions": {"type"},
}

// typeExtensions are struct-level markers (+structType=atomic becomes
// x-kubernetes-map-type: atomic).
var typeExtensions = map[string]spec.Extensions{
	metaV1 + "OwnerReference": {"x-kubernetes-map-type": "atomic"},
	metaV1 + "LabelSelector":  {"x-kubernetes-map-type": "atomic"},
	// ObjectReference is +structType=atomic: an Event's involvedObject
	// (core) and regarding/related (events.k8s.io) are owned whole.
	coreV1 + "ObjectReference": {"x-kubernetes-map-type": "atomic"},
}

// optionalOverrides are fields whose +optional/+required marker disagrees
// with what their omitempty tag implies (true means optional).
var optionalOverrides = map[string]bool{
	"io.k8s.api.coordination.v1beta1.LeaseCandidate.spec":          false,
	"io.k8s.api.coordination.v1beta1.LeaseCandidateSpec.strategy":  false,
	"io.k8s.api.coordination.v1alpha2.LeaseCandidate.spec":         false,
	"io.k8s.api.coordination.v1alpha2.LeaseCandidateSpec.strategy": false,
}

// memberExtensions returns the x-kubernetes-* extensions of one field: the
// list markers from the table above and the patch strategy from the
// patchStrategy/patchMergeKey struct tags, which upstream mirrors verbatim.
func memberExtensions(owner, name string, f reflect.StructField) spec.Extensions {
	ext := spec.Extensions{}
	key := owner + "." + name
	if lt := listTypes[key]; lt != "" {
		ext["x-kubernetes-list-type"] = lt
	}
	if keys, ok := listMapKeys[key]; ok {
		ext["x-kubernetes-list-map-keys"] = append([]interface{}(nil), keys...)
	}
	if ps := f.Tag.Get("patchStrategy"); ps != "" {
		ext["x-kubernetes-patch-strategy"] = ps
	}
	if mk := f.Tag.Get("patchMergeKey"); mk != "" {
		ext["x-kubernetes-patch-merge-key"] = mk
	}
	return ext
}

func cloneExtensions(e spec.Extensions) spec.Extensions {
	out := make(spec.Extensions, len(e))
	for k, v := range e {
		out[k] = v
	}
	return out
}

// fallbackDocs are the descriptions openapi-gen takes from the comments of
// types whose packages have no generated SwaggerDoc() (as upstream renders
// them: paragraphs kept, indented lines on their own line, TODOs dropped).
var fallbackDocs = map[string]map[string]string{
	metaV1 + "Time": {
		"": "Time is a wrapper around time.Time which supports correct marshaling to YAML and JSON.  Wrappers are provided for many of the factory methods that the time package offers.",
	},
	metaV1 + "MicroTime": {
		"": "MicroTime is version of Time with microsecond level precision.",
	},
	metaV1 + "WatchEvent": {
		"":       "Event represents a single event to a watched resource.",
		"object": "Object is:\n * If Type is Added or Modified: the new state of the object.\n * If Type is Deleted: the state of the object immediately before deletion.\n * If Type is Error: *Status is recommended; other types may make sense\n   depending on context.",
	},
	"io.k8s.apimachinery.pkg.runtime.RawExtension": {
		"": rawExtensionDoc,
	},
	"io.k8s.apimachinery.pkg.version.Info": {
		"":                      "Info contains versioning information. how we'll want to distribute that information.",
		"major":                 "Major is the major version of the binary version",
		"minor":                 "Minor is the minor version of the binary version",
		"emulationMajor":        "EmulationMajor is the major version of the emulation version",
		"emulationMinor":        "EmulationMinor is the minor version of the emulation version",
		"minCompatibilityMajor": "MinCompatibilityMajor is the major version of the minimum compatibility version",
		"minCompatibilityMinor": "MinCompatibilityMinor is the minor version of the minimum compatibility version",
	},
}

const rawExtensionDoc = "RawExtension is used to hold extensions in external versions.\n\n" +
	"To use this, make a field which has RawExtension as its type in your external, versioned struct, and Object in your internal struct. You also need to register your various plugin types.\n\n" +
	"// Internal package:\n\n\ttype MyAPIObject struct {\n\t\truntime.TypeMeta `json:\"\"`\n\t\tMyPlugin runtime.Object `json:\"myPlugin\"`\n\t}\n\n" +
	"\ttype PluginA struct {\n\t\tAOption string `json:\"aOption\"`\n\t}\n\n" +
	"// External package:\n\n\ttype MyAPIObject struct {\n\t\truntime.TypeMeta `json:\"\"`\n\t\tMyPlugin runtime.RawExtension `json:\"myPlugin\"`\n\t}\n\n" +
	"\ttype PluginA struct {\n\t\tAOption string `json:\"aOption\"`\n\t}\n\n" +
	"// On the wire, the JSON will look something like this:\n\n\t{\n\t\t\"kind\":\"MyAPIObject\",\n\t\t\"apiVersion\":\"v1\",\n\t\t\"myPlugin\": {\n\t\t\t\"kind\":\"PluginA\",\n\t\t\t\"aOption\":\"foo\",\n\t\t},\n\t}\n\n" +
	"So what happens? Decode first uses json or yaml to unmarshal the serialized data into your external MyAPIObject. That causes the raw JSON to be stored, but not unpacked. The next step is to copy (using pkg/conversion) into the internal struct. The runtime package's DefaultScheme has conversion functions installed which will unpack the JSON stored in RawExtension, turning it into the correct object type, and storing it in the Object. (TODO: In the case where the object is of an unknown type, a runtime.Unknown object will be created and stored.)"

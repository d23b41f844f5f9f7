package engine

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules below reproduce k8s.io/kubernetes
// pkg/apis/coordination/validation/validation.go (which is not a
// dependency) on top of apimachinery's ObjectMeta validation.

var metadataPath = field.NewPath("metadata")

// validLeaseStrategies are the Kubernetes-defined coordinated lease
// strategies (names without a "/").
var validLeaseStrategies = []string{string(coordinationv1.OldestEmulationVersion)}

func validateLease(l *coordinationv1.Lease) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&l.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)
	return append(errs, validateLeaseSpec(&l.Spec, field.NewPath("spec"))...)
}

// validateLeaseUpdate is the Lease strategy's ValidateUpdate without its
// ObjectMeta update check: upstream runs that check twice per update (in
// BeforeUpdate's common fields and in the strategy) and reports each error
// once; beforeUpdate runs it once, in validateGenericUpdate, which gives
// the same errors in the same order for a tenth less CPU per renewal.
func validateLeaseUpdate(l, _ *coordinationv1.Lease) field.ErrorList {
	return validateLeaseSpec(&l.Spec, field.NewPath("spec"))
}

func validateLeaseSpec(spec *coordinationv1.LeaseSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseDurationSeconds != nil && *spec.LeaseDurationSeconds <= 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseDurationSeconds"), spec.LeaseDurationSeconds, "must be greater than 0"))
	}
	if spec.LeaseTransitions != nil && *spec.LeaseTransitions < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("leaseTransitions"), spec.LeaseTransitions, "must be greater than or equal to 0"))
	}
	if spec.Strategy != nil {
		errs = append(errs, validateCoordinatedLeaseStrategy(*spec.Strategy, fldPath.Child("strategy"))...)
	}
	if spec.PreferredHolder != nil && *spec.PreferredHolder != "" && (spec.Strategy == nil || *spec.Strategy == "") {
		errs = append(errs, field.Forbidden(fldPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// validateCoordinatedLeaseStrategy keeps upstream's doubled field path
// (spec.strategy.strategy).
func validateCoordinatedLeaseStrategy(strategy coordinationv1.CoordinatedLeaseStrategy, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	parts := strings.Split(string(strategy), "/")
	if len(parts) == 1 {
		for _, s := range validLeaseStrategies {
			if parts[0] == s {
				return nil
			}
		}
		return append(errs, field.NotSupported(fldPath.Child("strategy"), strategy, validLeaseStrategies))
	}
	for _, msg := range utilvalidation.IsQualifiedName(string(strategy)) {
		errs = append(errs, field.Invalid(fldPath.Child("strategy"), strategy, msg))
	}
	return errs
}

// validLeaseCandidateName applies ConfigMap-key rules, as upstream does for
// LeaseCandidate names (uppercase and '_' are allowed).
func validLeaseCandidateName(name string, _ bool) []string {
	return utilvalidation.IsConfigMapKey(name)
}

func validateLeaseCandidate(c *coordinationv1beta1.LeaseCandidate) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&c.ObjectMeta, true, validLeaseCandidateName, metadataPath)
	return append(errs, validateLeaseCandidateSpec(&c.Spec, field.NewPath("spec"))...)
}

// validateLeaseCandidateUpdate leaves the ObjectMeta update check to
// validateGenericUpdate, as validateLeaseUpdate does.
func validateLeaseCandidateUpdate(c, old *coordinationv1beta1.LeaseCandidate) field.ErrorList {
	errs := validateLeaseCandidateSpec(&c.Spec, field.NewPath("spec"))
	return append(errs, apivalidation.ValidateImmutableField(c.Spec.LeaseName, old.Spec.LeaseName, field.NewPath("spec", "leaseName"))...)
}

func validateLeaseCandidateSpec(spec *coordinationv1beta1.LeaseCandidateSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.LeaseName == "" {
		errs = append(errs, field.Required(fldPath.Child("leaseName"), ""))
	}
	var ev, bv semver
	if spec.EmulationVersion != "" {
		var err error
		if ev, err = parseSemver(spec.EmulationVersion); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("emulationVersion"), spec.EmulationVersion, "must be a valid semantic version"))
		}
	}
	if spec.BinaryVersion == "" {
		errs = append(errs, field.Required(fldPath.Child("binaryVersion"), ""))
	} else {
		var err error
		if bv, err = parseSemver(spec.BinaryVersion); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("binaryVersion"), spec.BinaryVersion, "must be a valid semantic version"))
		}
	}
	if spec.BinaryVersion != "" && spec.EmulationVersion != "" && bv.compare(ev) < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("binaryVersion"), spec.BinaryVersion, "must be greater than or equal to `emulationVersion`"))
	}
	if spec.Strategy == "" {
		errs = append(errs, field.Required(fldPath.Child("strategy"), ""))
	} else {
		if spec.Strategy == coordinationv1.OldestEmulationVersion && ev.compare(semver{}) == 0 {
			errs = append(errs, field.Required(fldPath.Child("emulationVersion"), "must be specified when `strategy` is 'OldestEmulationVersion'"))
		}
		errs = append(errs, validateCoordinatedLeaseStrategy(spec.Strategy, fldPath.Child("strategy"))...)
	}
	return errs
}

// validateGenericCreate is the common ObjectMeta validation
// kube-apiserver's BeforeCreate runs after the type's own, only when the
// latter passed: path-segment name rules.
func validateGenericCreate(o object, namespaced bool) field.ErrorList {
	return apivalidation.ValidateObjectMetaAccessor(o, namespaced, path.ValidatePathSegmentName, metadataPath)
}

// validateGenericUpdate is BeforeUpdate's validateCommonFields.
func validateGenericUpdate(o, old object) field.ErrorList {
	return validateGenericUpdateScoped(o, old, true)
}

// validateGenericUpdateScoped is validateGenericUpdate for a namespaced
// or cluster-scoped kind.
func validateGenericUpdateScoped(o, old object, namespaced bool) field.ErrorList {
	errs := apivalidation.ValidateObjectMetaAccessor(o, namespaced, path.ValidatePathSegmentName, metadataPath)
	return append(errs, apivalidation.ValidateObjectMetaAccessorUpdate(o, old, metadataPath)...)
}

// metadataAsStored reports whether o's metadata is old's but for a set
// resourceVersion and the times of its managedFields entries: the shape of
// every renewal. validateGenericUpdate then has nothing to find. Its
// update rules compare o with old (equal here: nothing immutable changed,
// the generation did not decrease, finalizers were not added), and the
// rest validates labels, annotations, owner references, finalizers and
// managedFields (operation, fieldsType, subresource; never the time),
// which passed when old was written, since every stored object went
// through that same validation. Skipping it saves a tenth of a renewal's
// CPU: upstream's helpers build a field path for every check eagerly.
// Should the rules ever tighten (a newer apimachinery), an object stored
// under the old rules keeps being renewable as long as its metadata does
// not change, where kube-apiserver would reject the renewal: the leniency
// Kubernetes itself calls ratcheting.
func metadataAsStored(o, old object) bool {
	if o.GetResourceVersion() == "" ||
		o.GetName() != old.GetName() || o.GetGenerateName() != old.GetGenerateName() ||
		o.GetNamespace() != old.GetNamespace() || o.GetUID() != old.GetUID() ||
		o.GetGeneration() != old.GetGeneration() || o.GetSelfLink() != old.GetSelfLink() {
		return false
	}
	if ct, oldCT := o.GetCreationTimestamp(), old.GetCreationTimestamp(); !ct.Equal(&oldCT) ||
		!o.GetDeletionTimestamp().Equal(old.GetDeletionTimestamp()) ||
		!ptrEqual(o.GetDeletionGracePeriodSeconds(), old.GetDeletionGracePeriodSeconds()) {
		return false
	}
	if !maps.Equal(o.GetLabels(), old.GetLabels()) || !maps.Equal(o.GetAnnotations(), old.GetAnnotations()) ||
		!slices.Equal(o.GetFinalizers(), old.GetFinalizers()) {
		return false
	}
	refs, oldRefs := o.GetOwnerReferences(), old.GetOwnerReferences()
	if len(refs) != len(oldRefs) {
		return false
	}
	for i := range refs {
		a, b := &refs[i], &oldRefs[i]
		if a.APIVersion != b.APIVersion || a.Kind != b.Kind || a.Name != b.Name || a.UID != b.UID ||
			!ptrEqual(a.Controller, b.Controller) || !ptrEqual(a.BlockOwnerDeletion, b.BlockOwnerDeletion) {
			return false
		}
	}
	mf, oldMF := o.GetManagedFields(), old.GetManagedFields()
	return len(mf) == 0 && len(oldMF) == 0 || managedFieldsEqualModuloTime(mf, oldMF)
}

func ptrEqual[T comparable](a, b *T) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// dedupErrors drops repeated identical causes; kube-apiserver 1.37 reports
// each metadata error once although several validators find it.
func dedupErrors(errs field.ErrorList) field.ErrorList {
	if len(errs) < 2 {
		return errs
	}
	seen := make(map[string]bool, len(errs))
	out := errs[:0:0]
	for _, e := range errs {
		k := string(e.Type) + "\x00" + e.Field + "\x00" + e.ErrorBody()
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, e)
	}
	return out
}

// ensureNamespace defaults an object's namespace from the request and
// rejects a conflicting one, as rest.EnsureObjectNamespaceMatchesRequestNamespace.
func ensureNamespace(o metav1.Object, ns string) error {
	if ns == "" {
		// A cluster-scoped object: any namespace it names is dropped,
		// as EnsureObjectNamespaceMatchesRequestNamespace does.
		o.SetNamespace("")
		return nil
	}
	switch o.GetNamespace() {
	case ns:
		return nil
	case "":
		o.SetNamespace(ns)
		return nil
	}
	return badRequest("the namespace of the provided object does not match the namespace sent on the request")
}

// semver is a strict semantic version, parsed with the rules of
// github.com/blang/semver/v4 Parse (which upstream uses and which is not a
// dependency here).
type semver struct {
	major, minor, patch uint64
	pre                 []prVersion
}

type prVersion struct {
	str   string
	num   uint64
	isNum bool
}

const (
	semverNumbers  = "0123456789"
	semverAlphanum = "-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ" + semverNumbers
)

func containsOnly(s, set string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return !strings.ContainsRune(set, r) }) == -1
}

func hasLeadingZeroes(s string) bool { return len(s) > 1 && s[0] == '0' }

func parseSemverNumber(s, what string) (uint64, error) {
	if !containsOnly(s, semverNumbers) {
		return 0, fmt.Errorf("invalid character(s) found in %s number %q", what, s)
	}
	if hasLeadingZeroes(s) {
		return 0, fmt.Errorf("%s number must not contain leading zeroes %q", what, s)
	}
	var n uint64
	if s == "" {
		return 0, fmt.Errorf("empty %s number", what)
	}
	for _, c := range s {
		d := uint64(c - '0')
		if n > (^uint64(0)-d)/10 {
			return 0, fmt.Errorf("%s number %q out of range", what, s)
		}
		n = n*10 + d
	}
	return n, nil
}

func parseSemver(s string) (semver, error) {
	var v semver
	if s == "" {
		return v, fmt.Errorf("version string empty")
	}
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 {
		return v, fmt.Errorf("no Major.Minor.Patch elements found")
	}
	var err error
	if v.major, err = parseSemverNumber(parts[0], "major"); err != nil {
		return semver{}, err
	}
	if v.minor, err = parseSemverNumber(parts[1], "minor"); err != nil {
		return semver{}, err
	}
	patch := parts[2]
	var build, pre []string
	if i := strings.IndexByte(patch, '+'); i != -1 {
		build = strings.Split(patch[i+1:], ".")
		patch = patch[:i]
	}
	if i := strings.IndexByte(patch, '-'); i != -1 {
		pre = strings.Split(patch[i+1:], ".")
		patch = patch[:i]
	}
	if v.patch, err = parseSemverNumber(patch, "patch"); err != nil {
		return semver{}, err
	}
	for _, p := range pre {
		if p == "" {
			return semver{}, fmt.Errorf("prerelease is empty")
		}
		switch {
		case containsOnly(p, semverNumbers):
			n, err := parseSemverNumber(p, "prerelease")
			if err != nil {
				return semver{}, err
			}
			v.pre = append(v.pre, prVersion{num: n, isNum: true})
		case containsOnly(p, semverAlphanum):
			v.pre = append(v.pre, prVersion{str: p})
		default:
			return semver{}, fmt.Errorf("invalid character(s) found in prerelease %q", p)
		}
	}
	for _, b := range build {
		if b == "" {
			return semver{}, fmt.Errorf("build meta data is empty")
		}
		if !containsOnly(b, semverAlphanum) {
			return semver{}, fmt.Errorf("invalid character(s) found in build meta data %q", b)
		}
	}
	return v, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// compare orders versions by SemVer 2.0 precedence (build metadata is
// ignored), like blang's Version.Compare.
func (v semver) compare(o semver) int {
	if c := cmpUint(v.major, o.major); c != 0 {
		return c
	}
	if c := cmpUint(v.minor, o.minor); c != 0 {
		return c
	}
	if c := cmpUint(v.patch, o.patch); c != 0 {
		return c
	}
	switch {
	case len(v.pre) == 0 && len(o.pre) == 0:
		return 0
	case len(v.pre) == 0:
		return 1
	case len(o.pre) == 0:
		return -1
	}
	for i := 0; i < len(v.pre) && i < len(o.pre); i++ {
		if c := v.pre[i].compare(o.pre[i]); c != 0 {
			return c
		}
	}
	return cmpUint(uint64(len(v.pre)), uint64(len(o.pre)))
}

func (p prVersion) compare(o prVersion) int {
	switch {
	case p.isNum && o.isNum:
		return cmpUint(p.num, o.num)
	case p.isNum:
		return -1
	case o.isNum:
		return 1
	}
	return strings.Compare(p.str, o.str)
}

// validateUpdateOptions is metav1validation.ValidateUpdateOptions, which
// builds three field paths on every call: options without a field
// manager, dry run or field validation (every renewal) have nothing to
// report.
func validateUpdateOptions(opts *metav1.UpdateOptions) field.ErrorList {
	if opts.FieldManager == "" && len(opts.DryRun) == 0 && opts.FieldValidation == "" {
		return nil
	}
	return metav1validation.ValidateUpdateOptions(opts)
}

// maxMetadataEntries bounds each of an object's labels, annotations,
// finalizers, owner references and managedFields entries. Kubernetes
// itself bounds only the annotations' total size (and the whole object,
// through etcd's value limit), but the field manager's cost grows with
// the square of a map's or set's entries (structured-merge-diff inserts
// each one into a sorted slice, in the random order of a Go map): 40,000
// labels cost half a second of CPU, 100,000 annotation keys ten. 1024
// entries cost about a millisecond, and no Lease needs more.
const maxMetadataEntries = 1024

// validateMetadataBounds is leasehold's addition to ObjectMeta validation:
// at most maxMetadataEntries entries in each metadata collection, reported
// as kube-apiserver reports a list that is too long.
func validateMetadataBounds(o metav1.Object) field.ErrorList {
	var errs field.ErrorList
	check := func(name string, n int) {
		if n > maxMetadataEntries {
			errs = append(errs, field.TooMany(metadataPath.Child(name), n, maxMetadataEntries))
		}
	}
	check("labels", len(o.GetLabels()))
	if apivalidation.ValidateAnnotationsSize(o.GetAnnotations()) == nil {
		// Too many annotations are mostly also too long; then that is
		// the one error, as kube-apiserver reports it.
		check("annotations", len(o.GetAnnotations()))
	}
	check("finalizers", len(o.GetFinalizers()))
	check("ownerReferences", len(o.GetOwnerReferences()))
	check("managedFields", len(o.GetManagedFields()))
	return errs
}

// refusedBeforeFieldManager reports, in time linear in the size of o's
// metadata, an object that validation will refuse for its size: more
// entries than validateMetadataBounds allows, or annotations over
// Kubernetes' 256 KiB. The write paths then skip the field manager, which
// is where such an object would cost seconds, and validation answers the
// same 422 as it would have after it: both checks are part of validation,
// and the field manager only ever changes managedFields.
func refusedBeforeFieldManager(o metav1.Object) bool {
	return len(validateMetadataBounds(o)) > 0 || apivalidation.ValidateAnnotationsSize(o.GetAnnotations()) != nil
}

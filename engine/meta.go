package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Name generation as kube-apiserver's SimpleNameGenerator: the prefix cut
// to 58 characters plus 5 random characters.
const (
	maxGeneratedNameLength         = 63 - 5
	maxNameGenerationCreateRetries = 8
)

func generateName(base string) string {
	if len(base) > maxGeneratedNameLength {
		base = base[:maxGeneratedNameLength]
	}
	return base + utilrand.String(5)
}

// wipeSystemFields clears what a client may not set on create
// (rest.WipeObjectMetaSystemFields); resourceVersion is checked later.
func wipeSystemFields(o metav1.Object) {
	o.SetCreationTimestamp(metav1.Time{})
	o.SetUID("")
	o.SetDeletionTimestamp(nil)
	o.SetDeletionGracePeriodSeconds(nil)
	o.SetSelfLink("")
}

// fillSystemFields sets uid and creationTimestamp (second precision, as
// stored by kube-apiserver).
func (e *Engine) fillSystemFields(o metav1.Object) {
	o.SetCreationTimestamp(metav1.NewTime(e.now().UTC().Truncate(time.Second)))
	o.SetUID(types.UID(uuid.NewString()))
}

// beforeCreate is rest.BeforeCreate: namespace, strategy, type
// validation, then (only if that passed) generic ObjectMeta validation.
func (e *Engine) beforeCreate(ctx context.Context, k *kind, namespace string, o object, dryRun bool) error {
	if err := ensureNamespace(o, namespace); err != nil {
		return err
	}
	// The NamespaceLifecycle admission runs before validation.
	if err := e.admitCreate(ctx, k, namespace, o, dryRun); err != nil {
		return err
	}
	o.SetDeletionTimestamp(nil)
	o.SetDeletionGracePeriodSeconds(nil)
	k.prepareForCreate(o)
	if errs := append(k.validate(o), validateMetadataBounds(o)...); len(errs) > 0 {
		return apierrors.NewInvalid(k.gk, o.GetName(), errs)
	}
	if errs := validateGenericCreate(o, k.res.Namespaced); len(errs) > 0 {
		return apierrors.NewInvalid(k.gk, o.GetName(), errs)
	}
	return nil
}

// beforeUpdate is rest.BeforeUpdate: system fields come from the stored
// object, then generic and type validation in one 422.
func (e *Engine) beforeUpdate(k *kind, namespace string, o, old object) error {
	if err := ensureNamespace(o, namespace); err != nil {
		return err
	}
	o.SetGeneration(old.GetGeneration())
	k.prepareForUpdate(o, old)
	if o.GetUID() == "" {
		o.SetUID(old.GetUID())
	}
	if ct := old.GetCreationTimestamp(); !ct.IsZero() {
		o.SetCreationTimestamp(ct)
	}
	if old.GetDeletionTimestamp() != nil {
		o.SetDeletionTimestamp(old.GetDeletionTimestamp())
	}
	if old.GetDeletionGracePeriodSeconds() != nil && o.GetDeletionGracePeriodSeconds() == nil {
		o.SetDeletionGracePeriodSeconds(old.GetDeletionGracePeriodSeconds())
	}
	var errs field.ErrorList
	if !metadataAsStored(o, old) {
		errs = validateGenericUpdateScoped(o, old, k.res.Namespaced)
	}
	errs = append(errs, k.validateUpdate(o, old)...)
	errs = append(errs, validateMetadataBounds(o)...)
	if errs = dedupErrors(errs); len(errs) > 0 {
		return apierrors.NewInvalid(k.gk, o.GetName(), errs)
	}
	return nil
}

// checkName is the update/patch handlers' URL-versus-body name check.
func checkName(o metav1.Object, name, namespace string) error {
	if o.GetName() != name {
		return badRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", o.GetName(), name))
	}
	if namespace != "" && o.GetNamespace() != "" && o.GetNamespace() != namespace {
		return badRequest(fmt.Sprintf("the namespace of the object (%s) does not match the namespace on the request (%s)", o.GetNamespace(), namespace))
	}
	return nil
}

// dedupOwnerReferences drops owner references with a repeated uid and
// warns, as kube-apiserver does.
func dedupOwnerReferences(ctx context.Context, o metav1.Object) {
	refs := o.GetOwnerReferences()
	if len(refs) < 2 {
		return
	}
	seen := make(map[types.UID]bool, len(refs))
	var out []metav1.OwnerReference
	var dups []string
	for _, r := range refs {
		if seen[r.UID] {
			dups = append(dups, string(r.UID))
			continue
		}
		seen[r.UID] = true
		out = append(out, r)
	}
	if len(dups) == 0 {
		return
	}
	o.SetOwnerReferences(out)
	AddWarning(ctx, fmt.Sprintf(".metadata.ownerReferences contains duplicate entries; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests. Duplicate UIDs found: %v", dups))
}

func isDryRun(dryRun []string) bool { return len(dryRun) > 0 }

// managedFieldsEqualModuloTime reports whether two managedFields lists
// differ at most in their timestamps.
func managedFieldsEqualModuloTime(a, b []metav1.ManagedFieldsEntry) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	for i := range a {
		x, y := &a[i], &b[i]
		if x.Manager != y.Manager || x.Operation != y.Operation || x.APIVersion != y.APIVersion ||
			x.FieldsType != y.FieldsType || x.Subresource != y.Subresource {
			return false
		}
		if (x.FieldsV1 == nil) != (y.FieldsV1 == nil) || (x.FieldsV1 != nil && string(x.FieldsV1.Raw) != string(y.FieldsV1.Raw)) {
			return false
		}
	}
	return true
}

package engine

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1alpha2 "k8s.io/api/coordination/v1alpha2"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Column definitions as kube-apiserver's printers
// (pkg/printers/internalversion/printers.go), whose descriptions come from
// the types' swagger docs.
var (
	nameColumn = metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]}
	ageColumn  = metav1.TableColumnDefinition{Name: "Age", Type: "string", Description: metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]}
)

// leaseTable: upstream's Name, Holder, Age, plus leasehold's priority-1
// (-o wide) columns, which kube-apiserver does not have.
func leaseTable() ([]metav1.TableColumnDefinition, func(e *Engine, o object) []any) {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "Holder", Type: "string", Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["holderIdentity"]},
		ageColumn,
		{Name: "Renewed", Type: "string", Priority: 1, Description: "Time since spec.renewTime, the last renewal by the holder."},
		{Name: "Expires", Type: "string", Priority: 1, Description: "Time until spec.renewTime plus spec.leaseDurationSeconds, or \"expired\"."},
		{Name: "Transitions", Type: "integer", Priority: 1, Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["leaseTransitions"]},
		{Name: "Strategy", Type: "string", Priority: 1, Description: coordinationv1.LeaseSpec{}.SwaggerDoc()["strategy"]},
	}
	cells := func(e *Engine, o object) []any {
		l := o.(*coordinationv1.Lease)
		now := e.now()
		holder, strategy := "", ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if l.Spec.Strategy != nil {
			strategy = string(*l.Spec.Strategy)
		}
		renewed, expires := "<none>", "<none>"
		if l.Spec.RenewTime != nil {
			renewed = humanSince(l.Spec.RenewTime.Time, now)
			if l.Spec.LeaseDurationSeconds != nil {
				left := l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).Sub(now)
				if left <= 0 {
					expires = "expired"
				} else {
					expires = duration.HumanDuration(left)
				}
			}
		}
		var transitions int64
		if l.Spec.LeaseTransitions != nil {
			transitions = int64(*l.Spec.LeaseTransitions)
		}
		return []any{l.Name, holder, humanSince(l.CreationTimestamp.Time, now), renewed, expires, transitions, strategy}
	}
	return cols, cells
}

// leaseCandidateTable: upstream's columns (the two version columns really
// have empty descriptions upstream), then leasehold's Drained and, with
// -o wide, who drained the candidate's identity.
func leaseCandidateTable() ([]metav1.TableColumnDefinition, func(e *Engine, o object) []any) {
	cols := []metav1.TableColumnDefinition{
		nameColumn,
		{Name: "LeaseName", Type: "string", Description: coordinationv1alpha2.LeaseCandidateSpec{}.SwaggerDoc()["leaseName"]},
		{Name: "BinaryVersion", Type: "string", Description: ""},
		{Name: "EmulationVersion", Type: "string", Description: ""},
		ageColumn,
		{Name: "Drained", Type: "boolean", Description: "Whether an operator drained the candidate's identity (leasehold drain): it is never granted a lease."},
		{Name: "Drained By", Type: "string", Priority: 1, Description: "Who drained the candidate's identity."},
	}
	cells := func(e *Engine, o object) []any {
		c := o.(*coordinationv1beta1.LeaseCandidate)
		by, drained := e.drained(c.Namespace, c.Name)
		if !drained {
			by = "<none>"
		}
		return []any{c.Name, c.Spec.LeaseName, c.Spec.BinaryVersion, c.Spec.EmulationVersion, humanSince(c.CreationTimestamp.Time, e.now()),
			drained, by}
	}
	return cols, cells
}

// humanSince is the printers' translateTimestampSince.
func humanSince(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

// ConvertToTable renders an object or a list (in the scope's version) as a
// meta.k8s.io/v1 Table. For a v1beta1 Table the caller rewrites the
// apiVersion of the Table and of PartialObjectMetadata rows.
func (e *Engine) ConvertToTable(ctx context.Context, s Scope, obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
	t, err := e.convertToTable(s, obj, opts)
	return t, toStatus(err)
}

func (e *Engine) convertToTable(s Scope, obj runtime.Object, opts *metav1.TableOptions) (*metav1.Table, error) {
	k, err := e.kindFor(s)
	if err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &metav1.TableOptions{}
	}
	if errs := metav1validation.ValidateTableOptions(opts); len(errs) > 0 {
		return nil, badRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs.ToAggregate().Error()))
	}
	var items []object
	table := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}}
	if meta.IsListType(obj) {
		objs, err := meta.ExtractList(obj)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		for _, item := range objs {
			o, ok := k.toStorage(item)
			if !ok {
				return nil, apierrors.NewInternalError(fmt.Errorf("unrecognized list item type %T", item))
			}
			items = append(items, o)
		}
		if lm, err := meta.ListAccessor(obj); err == nil {
			table.ResourceVersion = lm.GetResourceVersion()
			table.Continue = lm.GetContinue()
			table.RemainingItemCount = lm.GetRemainingItemCount()
		}
	} else {
		o, ok := k.toStorage(obj)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("unrecognized type %T for table conversion", obj))
		}
		items = []object{o}
		table.ResourceVersion = o.GetResourceVersion()
	}
	if !opts.NoHeaders {
		table.ColumnDefinitions = k.columns
	}
	table.Rows = make([]metav1.TableRow, 0, len(items))
	for _, o := range items {
		row := metav1.TableRow{Cells: k.cells(e, o)}
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			row.Object.Object = k.fromStorage(o.DeepCopyObject().(object), s.Version)
		case metav1.IncludeMetadata, "":
			partial := meta.AsPartialObjectMetadata(o)
			partial.SetGroupVersionKind(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata"))
			row.Object.Object = partial
		case metav1.IncludeNone:
		}
		table.Rows = append(table.Rows, row)
	}
	return table, nil
}

package apiserver

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// tableOptions decodes ?includeObject= etc. when a Table was asked for
// (handlers.optionsForTransform); nil otherwise.
func (r *request) tableOptions(mo mediaOptions) (*metav1.TableOptions, error) {
	if mo.convert == nil || mo.convert.Kind != "Table" {
		return nil, nil
	}
	opts := &metav1.TableOptions{}
	if err := r.decodeOptions(opts, metaV1); err != nil {
		return nil, err
	}
	switch errs := metav1validation.ValidateTableOptions(opts); len(errs) {
	case 0:
		return opts, nil
	case 1:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs[0].Error()))
	default:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("Unable to convert to Table as requested: %v", errs))
	}
}

// transform converts a result to what the Accept header asked for
// (handlers.transformObject) and returns the group version to encode in.
func (r *request) transform(obj runtime.Object, mo mediaOptions) (runtime.Object, schema.GroupVersion, error) {
	target := mo.convert
	if target == nil {
		return obj, r.gv, nil
	}
	gv := target.GroupVersion()
	opts, err := r.tableOptions(mo)
	if err != nil {
		return nil, gv, err
	}
	ctx, err := r.ctx()
	if err != nil {
		return nil, gv, err
	}
	out, err := r.transformTo(ctx, obj, target, opts)
	return out, gv, err
}

// transformTo does the conversion for one object; watch events use it too.
func (r *request) transformTo(ctx context.Context, obj runtime.Object, target *schema.GroupVersionKind, opts *metav1.TableOptions) (runtime.Object, error) {
	if _, ok := obj.(*metav1.Status); ok {
		return obj, nil
	}
	gv := target.GroupVersion()
	switch target.Kind {
	case "PartialObjectMetadata":
		return asPartialObjectMetadata(obj, gv)
	case "PartialObjectMetadataList":
		return asPartialObjectMetadataList(obj, gv)
	case "Table":
		return r.asTable(ctx, obj, opts, gv)
	}
	return nil, notAcceptable(r.h.mediaTypes)
}

func asPartialObjectMetadata(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	if meta.IsListType(obj) {
		return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadata, but the requested object is a list (%T)", obj))
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	p := meta.AsPartialObjectMetadata(m)
	p.SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
	return p, nil
}

func asPartialObjectMetadataList(obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	li, ok := obj.(metav1.ListInterface)
	if !ok {
		return nil, notAcceptableMessage(fmt.Sprintf("you requested PartialObjectMetadataList, but the requested object is not a list (%T)", obj))
	}
	list := &metav1.PartialObjectMetadataList{Items: []metav1.PartialObjectMetadata{}}
	itemKind := gv.WithKind("PartialObjectMetadata")
	err := meta.EachListItem(obj, func(item runtime.Object) error {
		m, err := meta.Accessor(item)
		if err != nil {
			return err
		}
		p := meta.AsPartialObjectMetadata(m)
		p.SetGroupVersionKind(itemKind)
		list.Items = append(list.Items, *p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	list.ResourceVersion = li.GetResourceVersion()
	list.Continue = li.GetContinue()
	list.RemainingItemCount = li.GetRemainingItemCount()
	list.SetGroupVersionKind(gv.WithKind("PartialObjectMetadataList"))
	return list, nil
}

// asTable asks the engine for the Table and applies includeObject to the
// rows (handlers.asTable): Metadata (default) turns each row object into a
// PartialObjectMetadata, Object keeps the versioned object, None drops it.
func (r *request) asTable(ctx context.Context, obj runtime.Object, opts *metav1.TableOptions, gv schema.GroupVersion) (runtime.Object, error) {
	table, err := r.h.eng.ConvertToTable(ctx, r.scope, obj, opts)
	if err != nil {
		return nil, err
	}
	for i := range table.Rows {
		row := &table.Rows[i]
		switch opts.IncludeObject {
		case metav1.IncludeObject:
			// Rows carry objects in the scope's version; they are written
			// with their kind, as ConvertToVersion does upstream.
			if row.Object.Object != nil {
				row.Object.Object.GetObjectKind().SetGroupVersionKind(r.scope.GroupVersionKind())
			}
		case metav1.IncludeMetadata, "":
			if row.Object.Object == nil {
				continue
			}
			if _, ok := row.Object.Object.(*metav1.PartialObjectMetadata); ok {
				row.Object.Object.GetObjectKind().SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
				continue
			}
			m, err := meta.Accessor(row.Object.Object)
			if err != nil {
				return nil, err
			}
			p := meta.AsPartialObjectMetadata(m)
			p.SetGroupVersionKind(gv.WithKind("PartialObjectMetadata"))
			row.Object.Object = p
		case metav1.IncludeNone:
			row.Object.Object = nil
		default:
			return nil, apierrors.NewBadRequest(fmt.Sprintf("unrecognized includeObject value: %q", opts.IncludeObject))
		}
	}
	if table.Rows == nil {
		table.Rows = []metav1.TableRow{}
	}
	return table, nil
}

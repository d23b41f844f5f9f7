package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The YAML serializer converts the JSON of what it encodes to YAML through
// a generic tree of the whole document: for a list of 50,000 Leases (25 MB
// of JSON) that tree costs gigabytes. encodeYAMLCollection writes the same
// bytes with one item's tree at a time.

// errNotCollection: the object is not one encodeYAMLCollection writes.
var errNotCollection = errors.New("not a collection")

// yamlItemsMin is the smallest collection worth encoding item by item;
// smaller ones go through the serializer as they are.
const yamlItemsMin = 64

// collectionItems returns the addressable slice field holding a list's
// items (Items) or a Table's rows (Rows), with its JSON name.
func collectionItems(obj runtime.Object) (reflect.Value, string, bool) {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, "", false
	}
	field, name := "Items", "items"
	if _, ok := obj.(*metav1.Table); ok {
		field, name = "Rows", "rows"
	}
	f := v.Elem().FieldByName(field)
	if !f.IsValid() || f.Kind() != reflect.Slice || !f.CanSet() {
		return reflect.Value{}, "", false
	}
	return f, name, true
}

// encodeYAMLCollection writes obj, a list or Table with many items, as enc
// (the YAML serializer for its version) would, byte for byte: the document
// without its items (encoded by enc, which sets its apiVersion and kind),
// with each item converted on its own spliced in where the empty items
// were. ok is false (nothing written) when obj is not such a collection.
func encodeYAMLCollection(enc runtime.Encoder, obj runtime.Object, w io.Writer) (ok bool, err error) {
	items, name, ok := collectionItems(obj)
	if !ok || items.Len() < yamlItemsMin {
		return false, nil
	}
	saved := reflect.ValueOf(items.Interface())
	items.Set(reflect.MakeSlice(items.Type(), 0, 0))
	var head bytes.Buffer
	err = enc.Encode(obj, &head)
	items.Set(saved)
	if err != nil {
		return true, err
	}
	// Top-level keys are the only lines starting in the first column.
	empty := []byte(name + ": []\n")
	at := -1
	if bytes.HasPrefix(head.Bytes(), empty) {
		at = 0
	} else if i := bytes.Index(head.Bytes(), append([]byte{'\n'}, empty...)); i >= 0 {
		at = i + 1
	}
	if at < 0 {
		return true, fmt.Errorf("no %q line in the YAML of %T", empty, obj)
	}
	if _, err := w.Write(head.Bytes()[:at]); err != nil {
		return true, err
	}
	if _, err := io.WriteString(w, name+":\n"); err != nil {
		return true, err
	}
	// Each item is converted inside a one-item document of the same key,
	// so that it is indented and wrapped exactly as in the whole document.
	prefix := []byte(name + ":\n")
	var doc []byte
	for i := range items.Len() {
		doc = append(doc[:0], `{"`+name+`":[`...)
		item, err := json.Marshal(items.Index(i).Addr().Interface())
		if err != nil {
			return true, err
		}
		doc = append(append(doc, item...), "]}"...)
		out, err := yaml.JSONToYAML(doc)
		if err != nil {
			return true, err
		}
		if !bytes.HasPrefix(out, prefix) {
			return true, fmt.Errorf("unexpected YAML of item %d of %T", i, obj)
		}
		if _, err := w.Write(out[len(prefix):]); err != nil {
			return true, err
		}
	}
	_, err = w.Write(head.Bytes()[at+len(empty):])
	return true, err
}

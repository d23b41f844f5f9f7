package engine

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Events are stored once, as core/v1 Events under /registry/events/, and
// served both as core/v1 Event and as events.k8s.io/v1 Event, converted
// as kube-apiserver converts them (pkg/apis/events/v1/conversion.go).
// Each version validates as upstream does for a request in it: core/v1
// with the legacy rules only, events.k8s.io/v1 with the strict ones.

// EventsGroupName is the group of the newer Event API.
const EventsGroupName = eventsv1.GroupName

const eventsKeyPrefix = "/registry/events/"

// Upstream's length limits of an Event's fields (core validation).
const (
	eventReportingInstanceLimit = 128
	eventActionLimit            = 128
	eventReasonLimit            = 128
	eventNoteLimit              = 1024
)

var eventVerbs = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}

func newEventKindBase(res *Resource, gr schema.GroupResource, gk schema.GroupKind) *kind {
	k := &kind{
		res:                      res,
		gr:                       gr,
		gk:                       gk,
		storageGV:                corev1.SchemeGroupVersion,
		keyPrefix:                eventsKeyPrefix,
		upstreamKeyPrefix:        eventsKeyPrefix,
		newObj:                   func() object { return &corev1.Event{} },
		prepareForCreate:         func(object) {},
		prepareForUpdate:         func(object, object) {},
		fieldSet:                 eventFieldSet,
		isEvent:                  true,
		allowUnconditionalUpdate: true,
	}
	k.columns, k.cells = eventTable()
	return k
}

func newCoreEventKind() *kind {
	res := &Resource{
		Group: "", Kind: "Event", ListKind: "EventList",
		Plural: "events", Singular: "event", Namespaced: true,
		Versions:       []ServedVersion{{Version: "v1"}},
		StorageVersion: "v1",
		Verbs:          eventVerbs,
		ShortNames:     []string{"ev"},
	}
	k := newEventKindBase(res, schema.GroupResource{Resource: "events"}, schema.GroupKind{Kind: "Event"})
	k.newList = func(_ string, items []object, lm metav1.ListMeta) runtime.Object {
		l := &corev1.EventList{ListMeta: lm, Items: make([]corev1.Event, len(items))}
		l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("EventList"))
		for i, o := range items {
			l.Items[i] = *o.(*corev1.Event)
			l.Items[i].TypeMeta = metav1.TypeMeta{}
		}
		return l
	}
	k.toStorage = func(in runtime.Object) (object, bool) {
		ev, ok := in.(*corev1.Event)
		return ev, ok
	}
	k.fromStorage = func(o object, _ string) runtime.Object {
		setGVK(o, corev1.SchemeGroupVersion.WithKind("Event"))
		return o
	}
	k.validate = func(o object) field.ErrorList { return validateEvent(o.(*corev1.Event), false) }
	k.validateUpdate = func(o, old object) field.ErrorList {
		return validateEventUpdate(o.(*corev1.Event), old.(*corev1.Event), false)
	}
	k.fieldLabel = coreEventFieldLabel
	return k
}

func newEventsEventKind() *kind {
	res := &Resource{
		Group: EventsGroupName, Kind: "Event", ListKind: "EventList",
		Plural: "events", Singular: "event", Namespaced: true,
		Versions:       []ServedVersion{{Version: "v1"}},
		StorageVersion: "v1",
		Verbs:          eventVerbs,
		ShortNames:     []string{"ev"},
	}
	k := newEventKindBase(res, schema.GroupResource{Group: EventsGroupName, Resource: "events"}, schema.GroupKind{Kind: "Event"})
	// (Invalid errors name the kind without its group: upstream serves
	// events.k8s.io from the core Event storage and its strategy.)
	// The storage version is core/v1 (in another group), so the storage
	// version hash is the one of core/v1 Event, as upstream.
	k.storageGV = corev1.SchemeGroupVersion
	k.newList = func(_ string, items []object, lm metav1.ListMeta) runtime.Object {
		l := &eventsv1.EventList{ListMeta: lm, Items: make([]eventsv1.Event, len(items))}
		l.SetGroupVersionKind(eventsv1.SchemeGroupVersion.WithKind("EventList"))
		for i, o := range items {
			l.Items[i] = *coreToEventsV1(o.(*corev1.Event))
			l.Items[i].TypeMeta = metav1.TypeMeta{}
		}
		return l
	}
	k.toStorage = func(in runtime.Object) (object, bool) {
		switch ev := in.(type) {
		case *eventsv1.Event:
			return eventsV1ToCore(ev), true
		case *corev1.Event:
			return ev, true
		}
		return nil, false
	}
	k.fromStorage = func(o object, _ string) runtime.Object { return coreToEventsV1(o.(*corev1.Event)) }
	k.validate = func(o object) field.ErrorList { return validateEvent(o.(*corev1.Event), true) }
	k.validateUpdate = func(o, old object) field.ErrorList {
		return validateEventUpdate(o.(*corev1.Event), old.(*corev1.Event), true)
	}
	k.fieldLabel = eventsV1FieldLabel
	return k
}

// eventsV1ToCore converts an events.k8s.io/v1 Event to the stored
// core/v1 form. ObjectMeta is shared, not copied.
func eventsV1ToCore(in *eventsv1.Event) *corev1.Event {
	out := &corev1.Event{
		ObjectMeta:          in.ObjectMeta,
		InvolvedObject:      in.Regarding,
		Reason:              in.Reason,
		Message:             in.Note,
		Source:              in.DeprecatedSource,
		FirstTimestamp:      in.DeprecatedFirstTimestamp,
		LastTimestamp:       in.DeprecatedLastTimestamp,
		Count:               in.DeprecatedCount,
		Type:                in.Type,
		EventTime:           in.EventTime,
		Action:              in.Action,
		Related:             in.Related,
		ReportingController: in.ReportingController,
		ReportingInstance:   in.ReportingInstance,
	}
	if in.Series != nil {
		out.Series = &corev1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Event"))
	return out
}

// coreToEventsV1 converts a stored Event to events.k8s.io/v1.
func coreToEventsV1(in *corev1.Event) *eventsv1.Event {
	out := &eventsv1.Event{
		ObjectMeta:               in.ObjectMeta,
		EventTime:                in.EventTime,
		ReportingController:      in.ReportingController,
		ReportingInstance:        in.ReportingInstance,
		Action:                   in.Action,
		Reason:                   in.Reason,
		Regarding:                in.InvolvedObject,
		Related:                  in.Related,
		Note:                     in.Message,
		Type:                     in.Type,
		DeprecatedSource:         in.Source,
		DeprecatedFirstTimestamp: in.FirstTimestamp,
		DeprecatedLastTimestamp:  in.LastTimestamp,
		DeprecatedCount:          in.Count,
	}
	if in.Series != nil {
		out.Series = &eventsv1.EventSeries{Count: in.Series.Count, LastObservedTime: in.Series.LastObservedTime}
	}
	out.SetGroupVersionKind(eventsv1.SchemeGroupVersion.WithKind("Event"))
	return out
}

// eventFieldSet is the Event strategy's ToSelectableFields, in core/v1
// names (events.k8s.io/v1 labels are converted to them).
func eventFieldSet(o object) fields.Set {
	ev := o.(*corev1.Event)
	source := ev.Source.Component
	if source == "" {
		source = ev.ReportingController
	}
	return fields.Set{
		"metadata.name":                  ev.Name,
		"metadata.namespace":             ev.Namespace,
		"involvedObject.kind":            ev.InvolvedObject.Kind,
		"involvedObject.namespace":       ev.InvolvedObject.Namespace,
		"involvedObject.name":            ev.InvolvedObject.Name,
		"involvedObject.uid":             string(ev.InvolvedObject.UID),
		"involvedObject.apiVersion":      ev.InvolvedObject.APIVersion,
		"involvedObject.resourceVersion": ev.InvolvedObject.ResourceVersion,
		"involvedObject.fieldPath":       ev.InvolvedObject.FieldPath,
		"reason":                         ev.Reason,
		"reportingComponent":             ev.ReportingController,
		"source":                         source,
		"type":                           ev.Type,
	}
}

// coreEventFieldLabel is core/v1's field label conversion for Event.
func coreEventFieldLabel(label, value string) (string, string, error) {
	switch label {
	case "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type", "metadata.namespace", "metadata.name":
		return label, value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

// eventsV1Labels maps events.k8s.io/v1 field labels to core/v1's.
var eventsV1Labels = map[string]string{
	"reason":                    "reason",
	"regarding.kind":            "involvedObject.kind",
	"regarding.namespace":       "involvedObject.namespace",
	"regarding.name":            "involvedObject.name",
	"regarding.uid":             "involvedObject.uid",
	"regarding.apiVersion":      "involvedObject.apiVersion",
	"regarding.resourceVersion": "involvedObject.resourceVersion",
	"regarding.fieldPath":       "involvedObject.fieldPath",
	"reportingController":       "reportingComponent",
	"type":                      "type",
	"metadata.namespace":        "metadata.namespace",
	"metadata.name":             "metadata.name",
}

func eventsV1FieldLabel(label, value string) (string, string, error) {
	if internal, ok := eventsV1Labels[label]; ok {
		return internal, value, nil
	}
	return "", "", fmt.Errorf("field label not supported: %s", label)
}

// validateEvent is core validation's ValidateEventCreate; strict is a
// request in events.k8s.io/v1.
func validateEvent(ev *corev1.Event, strict bool) field.ErrorList {
	errs := legacyValidateEvent(ev, strict)
	if !strict {
		return errs
	}
	errs = append(errs, apivalidation.ValidateObjectMeta(&ev.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, metadataPath)...)
	errs = append(errs, validateEventSeries(ev)...)
	if ev.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", ev.Type)))
	}
	if !ev.FirstTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("firstTimestamp"), "", "needs to be unset"))
	}
	if !ev.LastTimestamp.IsZero() {
		errs = append(errs, field.Invalid(field.NewPath("lastTimestamp"), "", "needs to be unset"))
	}
	if ev.Count != 0 {
		errs = append(errs, field.Invalid(field.NewPath("count"), "", "needs to be unset"))
	}
	if ev.Source.Component != "" || ev.Source.Host != "" {
		errs = append(errs, field.Invalid(field.NewPath("source"), "", "needs to be unset"))
	}
	return errs
}

// validateEventUpdate is ValidateEventUpdate (ObjectMeta's update rules
// are checked by beforeUpdate).
func validateEventUpdate(ev, old *corev1.Event, strict bool) field.ErrorList {
	errs := legacyValidateEvent(ev, strict)
	if !strict {
		return errs
	}
	if !reflect.DeepEqual(ev.Series, old.Series) {
		errs = append(errs, validateEventSeries(ev)...)
	}
	immutable := func(n, o any, name string) {
		errs = append(errs, apivalidation.ValidateImmutableField(n, o, field.NewPath(name))...)
	}
	immutable(ev.InvolvedObject, old.InvolvedObject, "involvedObject")
	immutable(ev.Reason, old.Reason, "reason")
	immutable(ev.Message, old.Message, "message")
	immutable(ev.Source, old.Source, "source")
	immutable(ev.FirstTimestamp, old.FirstTimestamp, "firstTimestamp")
	immutable(ev.LastTimestamp, old.LastTimestamp, "lastTimestamp")
	immutable(ev.Count, old.Count, "count")
	immutable(ev.Reason, old.Reason, "reason")
	immutable(ev.Type, old.Type, "type")
	if !ev.EventTime.Truncate(time.Microsecond).UTC().Equal(old.EventTime.Truncate(time.Microsecond).UTC()) {
		immutable(ev.EventTime, old.EventTime, "eventTime")
	}
	immutable(ev.Action, old.Action, "action")
	immutable(ev.Related, old.Related, "related")
	immutable(ev.ReportingController, old.ReportingController, "reportingController")
	immutable(ev.ReportingInstance, old.ReportingInstance, "reportingInstance")
	return errs
}

func validateEventSeries(ev *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	if ev.Series != nil {
		if ev.Series.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if ev.Series.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}

// legacyValidateEvent holds the rules every Event passes.
func legacyValidateEvent(ev *corev1.Event, strict bool) field.ErrorList {
	var errs field.ErrorList
	reportingField := "reportingController"
	if !strict {
		reportingField = "reportingComponent"
	}
	nsPath := field.NewPath("involvedObject", "namespace")
	if ev.EventTime.IsZero() {
		// An old-style event: its namespace and its object's agree.
		if ev.InvolvedObject.Namespace == "" {
			if ev.Namespace != metav1.NamespaceNone && ev.Namespace != metav1.NamespaceDefault {
				errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
			}
		} else if ev.Namespace != ev.InvolvedObject.Namespace {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
	} else {
		if ev.InvolvedObject.Namespace == "" && ev.Namespace != metav1.NamespaceDefault && ev.Namespace != metav1.NamespaceSystem {
			errs = append(errs, field.Invalid(nsPath, ev.InvolvedObject.Namespace, "does not match event.namespace"))
		}
		if ev.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath(reportingField), ""))
		}
		for _, msg := range utilvalidation.IsQualifiedName(ev.ReportingController) {
			errs = append(errs, field.Invalid(field.NewPath(reportingField), ev.ReportingController, msg))
		}
		if ev.ReportingInstance == "" {
			errs = append(errs, field.Required(field.NewPath("reportingInstance"), ""))
		}
		if len(ev.ReportingInstance) > eventReportingInstanceLimit {
			errs = append(errs, field.Invalid(field.NewPath("reportingInstance"), "", fmt.Sprintf("can have at most %v characters", eventReportingInstanceLimit)))
		}
		if ev.Action == "" {
			errs = append(errs, field.Required(field.NewPath("action"), ""))
		}
		if len(ev.Action) > eventActionLimit {
			errs = append(errs, field.Invalid(field.NewPath("action"), "", fmt.Sprintf("can have at most %v characters", eventActionLimit)))
		}
		if ev.Reason == "" {
			errs = append(errs, field.Required(field.NewPath("reason"), ""))
		}
		if len(ev.Reason) > eventReasonLimit {
			errs = append(errs, field.Invalid(field.NewPath("reason"), "", fmt.Sprintf("can have at most %v characters", eventReasonLimit)))
		}
		if len(ev.Message) > eventNoteLimit {
			errs = append(errs, field.Invalid(field.NewPath("message"), "", fmt.Sprintf("can have at most %v characters", eventNoteLimit)))
		}
	}
	for _, msg := range utilvalidation.IsDNS1123Subdomain(ev.Namespace) {
		errs = append(errs, field.Invalid(field.NewPath("namespace"), ev.Namespace, msg))
	}
	return errs
}

// eventTable is upstream's Event printer, with the wide columns
// (kube-apiserver prints server-side tables wide).
func eventTable() ([]metav1.TableColumnDefinition, func(e *Engine, o object) []any) {
	doc := corev1.Event{}.SwaggerDoc()
	cols := []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: doc["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: doc["type"]},
		{Name: "Reason", Type: "string", Description: doc["reason"]},
		{Name: "Object", Type: "string", Description: doc["involvedObject"]},
		{Name: "Subobject", Type: "string", Priority: 1, Description: corev1.ObjectReference{}.SwaggerDoc()["fieldPath"]},
		{Name: "Source", Type: "string", Priority: 1, Description: doc["source"]},
		{Name: "Message", Type: "string", Description: doc["message"]},
		{Name: "First Seen", Type: "string", Priority: 1, Description: doc["firstTimestamp"]},
		{Name: "Count", Type: "string", Priority: 1, Description: doc["count"]},
		{Name: "Name", Type: "string", Priority: 1, Format: "name", Description: metav1.ObjectMeta{}.SwaggerDoc()["name"]},
	}
	cells := func(e *Engine, o object) []any {
		ev := o.(*corev1.Event)
		now := e.now()
		first := humanSince(ev.FirstTimestamp.Time, now)
		if ev.FirstTimestamp.IsZero() {
			first = humanSince(ev.EventTime.Time, now)
		}
		last := humanSince(ev.LastTimestamp.Time, now)
		if ev.LastTimestamp.IsZero() {
			last = first
		}
		count := ev.Count
		if ev.Series != nil {
			last = humanSince(ev.Series.LastObservedTime.Time, now)
			count = ev.Series.Count
		} else if count == 0 {
			count = 1 // a singleton event of the new API
		}
		target := strings.ToLower(ev.InvolvedObject.Kind)
		if ev.InvolvedObject.Name != "" {
			target += "/" + ev.InvolvedObject.Name
		}
		return []any{last, ev.Type, ev.Reason, target, ev.InvolvedObject.FieldPath,
			eventSource(ev), strings.TrimSpace(ev.Message), first, int64(count), ev.Name}
	}
	return cols, cells
}

// eventSource is the printers' formatEventSource.
func eventSource(ev *corev1.Event) string {
	component, instance := ev.Source.Component, ev.Source.Host
	if component == "" {
		component = ev.ReportingController
	}
	if instance == "" {
		instance = ev.ReportingInstance
	}
	if instance == "" {
		return component
	}
	return component + ", " + instance
}

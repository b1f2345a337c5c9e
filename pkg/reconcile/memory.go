package reconcile

import (
	"reflect"
	"sync"
)

// JobStore is memory a controller keeps of each job between syncs, by the
// job's queue key. A controller lists all of its stores in one JobMemory,
// so that a deleted job leaves nothing behind.
type JobStore interface {
	// Holds tells whether anything of key is remembered.
	Holds(key string) bool
	// Forget drops what is remembered of key, a job that is gone.
	Forget(key string)
}

// JobMemory is every JobStore of a controller. Its Forget is the one call a
// controller makes for a deleted job.
type JobMemory []JobStore

// Forget drops what every store remembers of key.
func (m JobMemory) Forget(key string) {
	for _, s := range m {
		s.Forget(key)
	}
}

// Holding returns the stores that still remember key.
func (m JobMemory) Holding(key string) []JobStore {
	var out []JobStore
	for _, s := range m {
		if s.Holds(key) {
			out = append(out, s)
		}
	}
	return out
}

var (
	jobStoreType = reflect.TypeFor[JobStore]()
	syncMapType  = reflect.TypeFor[sync.Map]()
)

// Unlisted names the fields of the struct that owner points to that could
// remember a job outside m: a JobStore, or a pointer to one, that m does
// not list, and any map or sync.Map. Tests call it on a controller, so that
// a store added to the controller and not to its memory fails them rather
// than outliving the jobs it remembers. The struct's own fields are looked
// at, and those of the structs it embeds.
func (m JobMemory) Unlisted(owner any) []string {
	listed := map[uintptr]bool{}
	for _, s := range m {
		listed[reflect.ValueOf(s).Pointer()] = true
	}
	return unlisted(reflect.ValueOf(owner).Elem(), listed)
}

func unlisted(v reflect.Value, listed map[uintptr]bool) []string {
	var out []string
	for i := range v.NumField() {
		field, name := v.Field(i), v.Type().Field(i).Name
		t := field.Type()
		switch {
		case v.Type().Field(i).Anonymous && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct:
			if !field.IsNil() {
				out = append(out, unlisted(field.Elem(), listed)...)
			}
		case v.Type().Field(i).Anonymous && t.Kind() == reflect.Struct:
			out = append(out, unlisted(field, listed)...)
		case t.Kind() == reflect.Pointer && t.Implements(jobStoreType):
			if !listed[field.Pointer()] {
				out = append(out, name)
			}
		case reflect.PointerTo(t).Implements(jobStoreType):
			if !listed[field.Addr().Pointer()] {
				out = append(out, name)
			}
		case t.Kind() == reflect.Map || t == syncMapType:
			out = append(out, name)
		}
	}
	return out
}

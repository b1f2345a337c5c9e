package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
)

// Meter adds up the size of the objects that Ensure writes under a context
// that carries it (WithMeter): what a step of a sync cost the API server,
// for the engine's pacing of each job's writes. With Hold set, Ensure
// writes nothing under that context: an object that would have to change
// is left as it is, with an error that IsHeld recognises.
type Meter struct {
	Hold  bool
	bytes atomic.Int64
}

// ErrHeld is what an Ensure held back by a Meter's Hold returns, wrapped.
var ErrHeld = errors.New("held back by the job's pace")

// IsHeld tells whether err is, or joins, a write held back by a Meter.
func IsHeld(err error) bool { return errors.Is(err, ErrHeld) }

// held returns the error of a write of a kind's object name when the meter
// ctx carries holds writes, nil when the write may go on.
func held(ctx context.Context, kind, name string) error {
	if m, ok := ctx.Value(meterKey{}).(*Meter); ok && m.Hold {
		return fmt.Errorf("writing %s %s: %w", kind, name, ErrHeld)
	}
	return nil
}

type meterKey struct{}

// WithMeter returns ctx carrying m.
func WithMeter(ctx context.Context, m *Meter) context.Context {
	return context.WithValue(ctx, meterKey{}, m)
}

// Bytes is the size of the objects written so far.
func (m *Meter) Bytes() int { return int(m.bytes.Load()) }

// charge adds the size of obj, just written, to the meter ctx carries.
func charge(ctx context.Context, obj any) {
	if m, ok := ctx.Value(meterKey{}).(*Meter); ok {
		m.bytes.Add(int64(sizeOf(obj)))
	}
}

// sizeOf is obj's size in its protobuf encoding, which the built-in types
// know; other objects are measured in JSON.
func sizeOf(obj any) int {
	if s, ok := obj.(interface{ Size() int }); ok {
		return s.Size()
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return 0
	}
	return len(b)
}

package persistence

import (
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"

	"github.com/sessiond/sessiond/messages/codec/codectest"
)

// TestDetachedMessagesShareNothing builds messages with every field empty
// and non-empty and checks that each detached copy equals its message and
// shares no memory with it that either side could change.
func TestDetachedMessagesShareNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := codectest.NewGen()
	for range 300 {
		src := make([]byte, 64+rng.IntN(512))
		for i := range src {
			src[i] = byte(rng.Uint32())
		}
		m := new(Message)
		g.Fill(m, src)
		checkDetached(t, m)
	}
	if u := g.Uncovered(); len(u) > 0 {
		t.Errorf("fields the generator never set to each variant:\n%v", u)
	}
}

// FuzzDetachedMessage: the same check for messages built from any input.
func FuzzDetachedMessage(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\xff\x01\xff\x02\xff\x03\xff\x04\xff\x05\xff\x06\xff\x07\xff\x08"))
	f.Fuzz(func(t *testing.T, src []byte) {
		m := new(Message)
		codectest.NewGen().Fill(m, src)
		checkDetached(t, m)
	})
}

func checkDetached(t *testing.T, m *Message) {
	t.Helper()
	d := m.detached()
	if !reflect.DeepEqual(*m, d) {
		t.Fatalf("detached copy differs:\n%+v\n%+v", *m, d)
	}
	if p := sharedMemory(reflect.ValueOf(*m), reflect.ValueOf(d), "Message"); p != "" {
		t.Fatalf("the detached copy shares %s with the message", p)
	}
}

// sharedMemory returns the path of the first pointer, slice element or map
// that a and b (values of one type) share, or "". Strings are immutable
// and may be shared.
func sharedMemory(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return sharedMemory(a.Elem(), b.Elem(), "(*"+path+")")
	case reflect.Slice:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := range a.Len() {
			if p := sharedMemory(a.Index(i), b.Index(i), path+"["+strconv.Itoa(i)+"]"); p != "" {
				return p
			}
		}
	case reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if p := sharedMemory(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}

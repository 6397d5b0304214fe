package codectest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
)

// Gen builds values from streams of bytes; an exhausted stream reads as
// zeros, which choose the empty variant of everything, so any input builds
// a value. The same bytes always build the same value. A Gen records the
// variants it produced across values, for Uncovered.
type Gen struct {
	src  []byte
	seen map[string]variant // "Type.Field" -> variants produced
}

// variant is a set of the shapes a field took.
type variant uint8

const (
	zero     variant = 1 << iota // the zero value: "", 0, false, nil
	empty                        // a non-nil slice or map of length 0
	nonEmpty                     // anything else
)

// NewGen returns a generator.
func NewGen() *Gen {
	return &Gen{seen: map[string]variant{}}
}

// Fill sets every exported field of the struct v points to, at any depth,
// as the bytes of src choose.
func (g *Gen) Fill(v any, src []byte) {
	g.src = src
	g.fillStruct(reflect.ValueOf(v).Elem())
}

// Uncovered lists the fields Fill has not yet set to each of their
// variants: zero and non-zero for every field, and also non-nil but empty
// for slices and maps. It accumulates over calls, so after enough values
// it should be empty.
func (g *Gen) Uncovered() []string {
	var out []string
	for f, v := range g.seen {
		want := zero | nonEmpty
		if strings.HasSuffix(f, "[]") {
			want |= empty
		}
		if v&want != want {
			out = append(out, fmt.Sprintf("%s (has %03b, wants %03b)", f, v, want))
		}
	}
	slices.Sort(out)
	return out
}

func (g *Gen) byte() byte {
	if len(g.src) == 0 {
		return 0
	}
	b := g.src[0]
	g.src = g.src[1:]
	return b
}

func (g *Gen) uint64() uint64 {
	var b [8]byte
	for i := range b {
		b[i] = g.byte()
	}
	return binary.BigEndian.Uint64(b[:])
}

// fillStruct sets each field and records the variant it got.
func (g *Gen) fillStruct(v reflect.Value) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		fv := v.Field(i)
		g.fill(fv)
		name := t.String() + "." + f.Name
		k := fv.Kind()
		if k == reflect.Slice || k == reflect.Map {
			name += "[]" // nil, empty and non-empty can differ on the wire
		}
		switch {
		case fv.IsZero():
			g.seen[name] |= zero
		case (k == reflect.Slice || k == reflect.Map) && fv.Len() == 0:
			g.seen[name] |= empty
		default:
			g.seen[name] |= nonEmpty
		}
	}
}

// Boundaries of msgpack's integer formats, and a few ordinary values.
var ints = []int64{0, 1, -1, 5, 127, 128, 255, 256, -32, -33, -128, -129, 32767, 32768, 65535, 65536,
	-32768, -32769, math.MaxInt32, math.MaxInt32 + 1, math.MaxUint32, math.MaxUint32 + 1,
	math.MinInt32, math.MinInt32 - 1, math.MaxInt64, math.MinInt64, 1_767_225_600_000}

// Floats whose encodings differ; 0 and -0 are both empty to omitempty.
var floats = []float64{0, math.Copysign(0, -1), 0.5, -1.5, 0.0042, 1e300, math.Inf(1), math.Inf(-1),
	math.SmallestNonzeroFloat64, math.MaxFloat64}

// length picks a string or byte length around msgpack's format switches
// (fixstr 31/32, str8 255/256, str16 65535/65536), mostly short ones.
func (g *Gen) length() int {
	switch b := g.byte(); {
	case b < 64:
		return 0
	case b < 200:
		return int(b % 9)
	case b < 215:
		return 31 + int(b%2)
	case b < 230:
		return 255 + int(b%2)
	case b < 232: // rare: big values make the checks slow under -race
		return 65535 + int(b%2)
	default:
		return 1 + int(b%40)
	}
}

// bytes returns n bytes of a pattern picked by one input byte: spending an
// input byte per output byte would starve the rest of the value.
func (g *Gen) bytes(n int) []byte {
	c := g.byte()
	pattern := []byte{c, c + 1, c + 2, c + 3, c + 4, c + 5, c + 6}
	return bytes.Repeat(pattern, n/len(pattern)+1)[:n]
}

func (g *Gen) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(string(g.bytes(g.length())))
	case reflect.Bool:
		v.SetBool(g.byte()&1 == 1)
	case reflect.Int, reflect.Int64:
		if i := int(g.byte()); i < len(ints) {
			v.SetInt(ints[i])
		} else if i < 2*len(ints) {
			v.SetInt(ints[0])
		} else {
			v.SetInt(int64(g.uint64()))
		}
	case reflect.Uint8:
		v.SetUint(uint64(g.byte()))
	case reflect.Float64:
		if i := int(g.byte()); i < len(floats) {
			v.SetFloat(floats[i])
		} else if i < 2*len(floats) {
			v.SetFloat(0)
		} else if f := math.Float64frombits(g.uint64()); !math.IsNaN(f) {
			// NaN is left out: it is never equal to itself, so decoded
			// values could not be compared. Its bits are checked by
			// CheckBytes, which compares floats bit for bit.
			v.SetFloat(f)
		}
	case reflect.Pointer:
		if g.byte()%4 != 0 {
			v.Set(reflect.New(v.Type().Elem()))
			g.fill(v.Elem())
		}
	case reflect.Struct:
		if g.byte()%5 != 0 {
			g.fillStruct(v)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			switch b := g.byte(); {
			case b < 64:
			case b < 96:
				v.SetBytes([]byte{})
			default:
				v.SetBytes(g.bytes(1 + g.length()))
			}
			return
		}
		switch n := int(g.byte() % 6); n {
		case 0:
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		default:
			v.Set(reflect.MakeSlice(v.Type(), n-1, n-1))
			for i := range n - 1 {
				g.fill(v.Index(i))
			}
		}
	case reflect.Map:
		switch n := int(g.byte() % 6); n {
		case 0:
		case 1:
			v.Set(reflect.MakeMap(v.Type()))
		default:
			v.Set(reflect.MakeMap(v.Type()))
			for range n - 1 {
				k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
				g.fill(k)
				g.fill(e)
				v.SetMapIndex(k, e)
			}
		}
	default:
		panic(fmt.Sprintf("codectest: cannot generate a %s", v.Type()))
	}
}

package codectest

import (
	"fmt"
	"reflect"
	"sync"
)

var shadows sync.Map // reflect.Type -> reflect.Type

// Shadow returns t with every struct type in it, at any depth, replaced by
// a method-less struct of the same fields and tags. Types without structs
// in them are returned as they are.
func Shadow(t reflect.Type) reflect.Type {
	if s, ok := shadows.Load(t); ok {
		return s.(reflect.Type)
	}
	s := shadow(t)
	shadows.Store(t, s)
	return s
}

func shadow(t reflect.Type) reflect.Type {
	switch t.Kind() {
	case reflect.Struct:
		fields := make([]reflect.StructField, t.NumField())
		for i := range fields {
			f := t.Field(i)
			if !f.IsExported() || f.Anonymous {
				panic(fmt.Sprintf("codectest: %s.%s: only exported, named fields have a shadow", t, f.Name))
			}
			fields[i] = reflect.StructField{Name: f.Name, Type: Shadow(f.Type), Tag: f.Tag}
		}
		return reflect.StructOf(fields)
	case reflect.Pointer:
		if e := Shadow(t.Elem()); e != t.Elem() {
			return reflect.PointerTo(e)
		}
	case reflect.Slice:
		if e := Shadow(t.Elem()); e != t.Elem() {
			return reflect.SliceOf(e)
		}
	case reflect.Map:
		if e := Shadow(t.Elem()); e != t.Elem() {
			return reflect.MapOf(t.Key(), e)
		}
	}
	return t
}

// ToShadow returns a pointer to a shadow copy of the value v points to.
func ToShadow(v any) any {
	src := reflect.ValueOf(v).Elem()
	dst := reflect.New(Shadow(src.Type()))
	convert(dst.Elem(), src)
	return dst.Interface()
}

// FromShadow copies the shadow value s points to into the value dst
// points to.
func FromShadow(dst, s any) {
	d := reflect.ValueOf(dst).Elem()
	d.SetZero()
	convert(d, reflect.ValueOf(s).Elem())
}

// convert copies src into the zero value dst, whose type is src's type or
// its shadow (or the other way round), keeping nil apart from empty.
func convert(dst, src reflect.Value) {
	if dst.Type() == src.Type() {
		dst.Set(src)
		return
	}
	switch src.Kind() {
	case reflect.Struct:
		for i := range src.NumField() {
			convert(dst.Field(i), src.Field(i))
		}
	case reflect.Pointer:
		if !src.IsNil() {
			dst.Set(reflect.New(dst.Type().Elem()))
			convert(dst.Elem(), src.Elem())
		}
	case reflect.Slice:
		if !src.IsNil() {
			dst.Set(reflect.MakeSlice(dst.Type(), src.Len(), src.Len()))
			for i := range src.Len() {
				convert(dst.Index(i), src.Index(i))
			}
		}
	case reflect.Map:
		if !src.IsNil() {
			dst.Set(reflect.MakeMapWithSize(dst.Type(), src.Len()))
			for it := src.MapRange(); it.Next(); {
				e := reflect.New(dst.Type().Elem()).Elem()
				convert(e, it.Value())
				dst.SetMapIndex(it.Key(), e)
			}
		}
	default:
		panic(fmt.Sprintf("codectest: cannot convert %s to %s", src.Type(), dst.Type()))
	}
}

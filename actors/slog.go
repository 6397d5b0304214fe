package actors

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/rs/zerolog"
)

// slogHandler routes protoactor's slog output to zerolog, so the library
// never prints on its own.
type slogHandler struct {
	log   zerolog.Logger
	attrs []groupedAttr
	group string
}

// groupedAttr is an attribute of WithAttrs and the group it was given in.
type groupedAttr struct {
	group string
	attr  slog.Attr
}

// NewSlogLogger returns an slog.Logger writing to log.
func NewSlogLogger(log zerolog.Logger) *slog.Logger { return slog.New(&slogHandler{log: log}) }

func (h *slogHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.log.GetLevel() <= zerologLevel(l)
}

func zerologLevel(l slog.Level) zerolog.Level {
	switch {
	case l >= slog.LevelError:
		return zerolog.ErrorLevel
	case l >= slog.LevelWarn:
		return zerolog.WarnLevel
	case l >= slog.LevelInfo:
		return zerolog.InfoLevel
	}
	return zerolog.DebugLevel
}

func (h *slogHandler) Handle(_ context.Context, r slog.Record) error {
	ev := h.log.WithLevel(zerologLevel(r.Level))
	for _, a := range h.attrs {
		ev = addAttr(ev, a.group, a.attr)
	}
	r.Attrs(func(a slog.Attr) bool {
		ev = addAttr(ev, h.group, a)
		return true
	})
	ev.Msg(r.Message)
	return nil
}

// addAttr adds a to ev under its key, prefixed by group. A key zerolog
// writes itself (message, level, time) gets a "slog." prefix, or the line
// would hold it twice and most readers would keep only one (protoactor
// names a dead letter's content "message"). A value of no basic kind is
// written as text, with its type: protoactor's messages marshal to JSON
// as {}.
func addAttr(ev *zerolog.Event, group string, a slog.Attr) *zerolog.Event {
	a.Value = a.Value.Resolve()
	key := a.Key
	if group != "" {
		key = group + "." + key
	}
	if key == "" {
		key = "attr"
	}
	switch key {
	case zerolog.MessageFieldName, zerolog.LevelFieldName, zerolog.TimestampFieldName:
		key = "slog." + key
	}
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		return ev.Str(key, v.String())
	case slog.KindInt64:
		return ev.Int64(key, v.Int64())
	case slog.KindUint64:
		return ev.Uint64(key, v.Uint64())
	case slog.KindFloat64:
		return ev.Float64(key, v.Float64())
	case slog.KindBool:
		return ev.Bool(key, v.Bool())
	case slog.KindDuration:
		return ev.Dur(key, v.Duration())
	case slog.KindTime:
		return ev.Time(key, v.Time())
	case slog.KindGroup:
		for _, ga := range v.Group() {
			ev = addAttr(ev, key, ga)
		}
		return ev
	}
	switch x := a.Value.Any().(type) {
	case nil:
		return ev.Interface(key, nil)
	case error:
		return ev.Str(key, x.Error())
	case fmt.Stringer:
		if s := x.String(); s != "" {
			return ev.Str(key, s)
		}
		// A proto message without fields (protoactor's Stop) prints as
		// nothing: its type says what it was.
		return ev.Str(key, fmt.Sprintf("%T", x))
	default:
		// A struct prints its fields but not its name (a dead letter's
		// content is any message): the type comes first.
		return ev.Str(key, fmt.Sprintf("%T %+v", x, x))
	}
}

func (h *slogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]groupedAttr(nil), h.attrs...)
	for _, a := range attrs {
		c.attrs = append(c.attrs, groupedAttr{h.group, a})
	}
	return &c
}

func (h *slogHandler) WithGroup(name string) slog.Handler {
	c := *h
	if c.group != "" {
		name = c.group + "." + name
	}
	c.group = name
	return &c
}

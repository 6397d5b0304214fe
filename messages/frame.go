package messages

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// errFrame reports msgpack whose declared sizes do not fit its bytes.
var errFrame = errors.New("malformed msgpack")

// checkFrame walks the msgpack value b holds and fails when any length or
// element count it declares exceeds the bytes that remain, or when bytes
// follow the value (a stored value is exactly one value; the decoder would
// ignore the rest, so a row with garbage appended would read as valid). The msgpack
// decoder allocates a declared length before reading it (a 5-byte bin32
// header asks for 4 GiB) and presizes slices by their declared count, so a
// corrupt stored value must be refused before it reaches the decoder.
// Fuzzing found this; the check costs one pass over the bytes.
func checkFrame(b []byte) error {
	pos, pending := 0, 1
	need := func(n uint64) error {
		if n > uint64(len(b)-pos) {
			return fmt.Errorf("%w: %d bytes declared at offset %d, %d left", errFrame, n, pos, len(b)-pos)
		}
		return nil
	}
	// size reads a big-endian length of w bytes.
	size := func(w int) (uint64, error) {
		if err := need(uint64(w)); err != nil {
			return 0, err
		}
		var n uint64
		switch w {
		case 1:
			n = uint64(b[pos])
		case 2:
			n = uint64(binary.BigEndian.Uint16(b[pos:]))
		case 4:
			n = uint64(binary.BigEndian.Uint32(b[pos:]))
		}
		pos += w
		return n, nil
	}
	// skip consumes n bytes of payload.
	skip := func(n uint64) error {
		if err := need(n); err != nil {
			return err
		}
		pos += int(n)
		return nil
	}
	// elems adds n values to read; each takes at least one byte.
	elems := func(n uint64) error {
		if err := need(n); err != nil {
			return err
		}
		pending += int(n)
		return nil
	}
	for ; pending > 0; pending-- {
		if pos >= len(b) {
			return fmt.Errorf("%w: value missing at offset %d", errFrame, pos)
		}
		c := b[pos]
		pos++
		var err error
		var n uint64
		switch {
		case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
			// fixints, nil, booleans: the code is the value
		case c <= 0x8f:
			err = elems(2 * uint64(c&0x0f))
		case c <= 0x9f:
			err = elems(uint64(c & 0x0f))
		case c <= 0xbf:
			err = skip(uint64(c & 0x1f))
		case c == 0xc4 || c == 0xd9:
			if n, err = size(1); err == nil {
				err = skip(n)
			}
		case c == 0xc5 || c == 0xda:
			if n, err = size(2); err == nil {
				err = skip(n)
			}
		case c == 0xc6 || c == 0xdb:
			if n, err = size(4); err == nil {
				err = skip(n)
			}
		case c == 0xc7:
			if n, err = size(1); err == nil {
				err = skip(n + 1)
			}
		case c == 0xc8:
			if n, err = size(2); err == nil {
				err = skip(n + 1)
			}
		case c == 0xc9:
			if n, err = size(4); err == nil {
				err = skip(n + 1)
			}
		case c == 0xca || c == 0xce || c == 0xd2:
			err = skip(4)
		case c == 0xcb || c == 0xcf || c == 0xd3:
			err = skip(8)
		case c == 0xcc || c == 0xd0:
			err = skip(1)
		case c == 0xcd || c == 0xd1:
			err = skip(2)
		case c >= 0xd4 && c <= 0xd8:
			err = skip(1 + 1<<(c-0xd4))
		case c == 0xdc:
			if n, err = size(2); err == nil {
				err = elems(n)
			}
		case c == 0xdd:
			if n, err = size(4); err == nil {
				err = elems(n)
			}
		case c == 0xde:
			if n, err = size(2); err == nil {
				err = elems(2 * n)
			}
		case c == 0xdf:
			if n, err = size(4); err == nil {
				err = elems(2 * n)
			}
		default: // 0xc1 is never used
			err = fmt.Errorf("%w: code %#x at offset %d", errFrame, c, pos-1)
		}
		if err != nil {
			return err
		}
	}
	if pos != len(b) {
		return fmt.Errorf("%w: %d bytes after the value", errFrame, len(b)-pos)
	}
	return nil
}

package header

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// This file is a small strict JSON reader. encoding/json is too lax for
// parity with the reference (serde_json, docs/safetensors.md §7): it matches field
// names case-insensitively, leaves zero values for missing fields and nulls,
// pads fixed-size arrays, turns lone surrogates into U+FFFD and nests 10,000
// levels deep. The reader below accepts exactly RFC 8259 JSON, as serde_json
// does, and lets the schema code in decode.go and index.go decide, field by
// field, what each value must be.
//
// Its input has already passed utf8.Valid, so raw bytes inside strings need no
// further checking.

// maxDepth is serde_json's recursion limit: the 128th nested array or object,
// counting the top-level object as the first, is refused.
const maxDepth = 127

// scanner reads one JSON text from b. Every method that fails returns a
// *FormatError of kind, with the absolute file offset of the failure (base +
// position in b) in its reason.
type scanner struct {
	b     []byte
	i     int
	depth int
	kind  ErrorKind
	base  uint64 // file offset of b[0], for messages
}

func (s *scanner) fail(format string, args ...any) error {
	return formatErr(s.kind, "", fmt.Sprintf(format, args...)+
		" at byte "+strconv.FormatUint(s.base+uint64(s.i), 10))
}

// ws skips JSON whitespace: space, tab, LF and CR, and nothing else (no NUL,
// no BOM, no Unicode spaces).
func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eof() bool { return s.i >= len(s.b) }

// peek is the next byte, or 0 at the end (0 never starts a JSON token).
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) consume(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// push enters an array or object, refusing the nesting serde_json refuses.
func (s *scanner) push() error {
	s.depth++
	if s.depth > maxDepth {
		return s.fail("recursion limit exceeded")
	}
	return nil
}

// object reads an object whose opening brace is next, calling member once per
// key with the scanner positioned at the member's value (whitespace skipped).
// member must consume exactly that value.
func (s *scanner) object(member func(key string) error) error {
	if !s.consume('{') {
		return s.fail("invalid type: expected a map")
	}
	if err := s.push(); err != nil {
		return err
	}
	s.ws()
	if !s.consume('}') {
		for {
			s.ws()
			if s.peek() != '"' {
				return s.fail("key must be a string")
			}
			key, err := s.str()
			if err != nil {
				return err
			}
			s.ws()
			if !s.consume(':') {
				return s.fail("expected ':'")
			}
			s.ws()
			if err := member(key); err != nil {
				return err
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume('}') {
				break
			}
			return s.fail("expected ',' or '}'")
		}
	}
	s.depth--
	return nil
}

// array reads an array whose opening bracket is next, calling elem for each
// element (whitespace skipped) with its zero-based index.
func (s *scanner) array(elem func(i int) error) error {
	if !s.consume('[') {
		return s.fail("invalid type: expected a sequence")
	}
	if err := s.push(); err != nil {
		return err
	}
	s.ws()
	if !s.consume(']') {
		for n := 0; ; n++ {
			s.ws()
			if err := elem(n); err != nil {
				return err
			}
			s.ws()
			if s.consume(',') {
				continue
			}
			if s.consume(']') {
				break
			}
			return s.fail("expected ',' or ']'")
		}
	}
	s.depth--
	return nil
}

// str reads a string whose opening quote is next and returns it decoded.
// Like serde_json it refuses raw control characters, unknown escapes and any
// \u escape that does not form a valid scalar value (lone surrogates).
func (s *scanner) str() (string, error) {
	if !s.consume('"') {
		return "", s.fail("invalid type: expected a string")
	}
	start := s.i
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '"':
			v := string(s.b[start:s.i])
			s.i++
			return v, nil
		case c == '\\':
			return s.strSlow(start)
		case c < 0x20:
			return "", s.fail("control character found while parsing a string")
		}
		s.i++
	}
	return "", s.fail("EOF while parsing a string")
}

// strSlow finishes a string that contains escapes.
func (s *scanner) strSlow(start int) (string, error) {
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return string(buf), nil
		case c < 0x20:
			return "", s.fail("control character found while parsing a string")
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		s.i++ // the backslash
		if s.eof() {
			break
		}
		e := s.b[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := s.unicodeEscape()
			if err != nil {
				return "", err
			}
			buf = utf8.AppendRune(buf, r)
		default:
			s.i--
			return "", s.fail("invalid escape")
		}
	}
	return "", s.fail("EOF while parsing a string")
}

// unicodeEscape reads the XXXX of \uXXXX (and a following low surrogate
// escape when XXXX is a high surrogate).
func (s *scanner) unicodeEscape() (rune, error) {
	n, err := s.hex4()
	if err != nil {
		return 0, err
	}
	switch {
	case n >= 0xDC00 && n <= 0xDFFF:
		return 0, s.fail("lone surrogate in hex escape")
	case n >= 0xD800 && n <= 0xDBFF:
		if !s.consume('\\') || !s.consume('u') {
			return 0, s.fail("unexpected end of hex escape")
		}
		lo, err := s.hex4()
		if err != nil {
			return 0, err
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, s.fail("lone surrogate in hex escape")
		}
		return 0x10000 + (n-0xD800)<<10 + (lo - 0xDC00), nil
	}
	return n, nil
}

func (s *scanner) hex4() (rune, error) {
	if len(s.b)-s.i < 4 {
		s.i = len(s.b)
		return 0, s.fail("EOF while parsing a string")
	}
	var n rune
	for k := 0; k < 4; k++ {
		c := s.b[s.i]
		var v byte
		switch {
		case c >= '0' && c <= '9':
			v = c - '0'
		case c >= 'a' && c <= 'f':
			v = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, s.fail("invalid escape")
		}
		n = n<<4 | rune(v)
		s.i++
	}
	return n, nil
}

// number reads a JSON number and reports whether it is an unsigned integer
// that fits in 64 bits (and its value). Anything else that serde_json accepts
// (negative integers, fractions, exponents, integers too big for u64) is
// valid but not unsigned; a value whose magnitude overflows float64 is
// refused, as serde_json refuses it ("number out of range").
func (s *scanner) number() (u uint64, isUint bool, err error) {
	start := s.i
	neg := s.consume('-')
	switch c := s.peek(); {
	case c == '0':
		s.i++
	case c >= '1' && c <= '9':
		s.digits()
	default:
		return 0, false, s.fail("invalid number")
	}
	isFloat := false
	if s.consume('.') {
		isFloat = true
		if !s.digits() {
			return 0, false, s.fail("invalid number")
		}
	}
	if s.consume('e') || s.consume('E') {
		isFloat = true
		if !s.consume('+') {
			s.consume('-')
		}
		if !s.digits() {
			return 0, false, s.fail("invalid number")
		}
	}
	lit := string(s.b[start:s.i])
	if !isFloat {
		if !neg {
			if v, err := strconv.ParseUint(lit, 10, 64); err == nil {
				return v, true, nil
			}
		} else if _, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return 0, false, nil
		}
	}
	// serde_json would hold this as an f64: refuse what overflows it.
	if f, _ := strconv.ParseFloat(lit, 64); math.IsInf(f, 0) {
		s.i = start
		return 0, false, s.fail("number out of range")
	}
	return 0, false, nil
}

// digits consumes [0-9]* and reports whether there was at least one.
func (s *scanner) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}

// uint reads a value that must be an unsigned 64-bit integer literal: "4",
// not "4.0", "4e0", "-0", "-4" or "18446744073709551616".
func (s *scanner) uint() (uint64, error) {
	c := s.peek()
	if c != '-' && (c < '0' || c > '9') {
		return 0, s.fail("invalid type: expected an unsigned integer")
	}
	at := s.i
	v, ok, err := s.number()
	if err != nil {
		return 0, err
	}
	if !ok {
		s.i = at
		return 0, s.fail("invalid type or value: expected an unsigned 64-bit integer")
	}
	return v, nil
}

// literal reads true, false or null.
func (s *scanner) literal(word string) error {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return s.fail("expected value")
	}
	s.i += len(word)
	return nil
}

// skip reads and discards any one value, still enforcing syntax, string
// validity, number range and the nesting limit, as serde_json does even for
// fields it ignores.
func (s *scanner) skip() error {
	_, err := s.value(false)
	return err
}

// value reads any one value. With keep it returns it as map[string]any,
// []any, string, json.Number, bool or nil (repeated object keys: last wins);
// without keep it returns nil and allocates only for strings.
func (s *scanner) value(keep bool) (any, error) {
	switch c := s.peek(); {
	case c == '{':
		var m map[string]any
		if keep {
			m = map[string]any{}
		}
		err := s.object(func(k string) error {
			v, err := s.value(keep)
			if keep {
				m[k] = v
			}
			return err
		})
		if !keep || err != nil {
			return nil, err
		}
		return m, nil
	case c == '[':
		var a []any
		if keep {
			a = []any{}
		}
		err := s.array(func(int) error {
			v, err := s.value(keep)
			if keep {
				a = append(a, v)
			}
			return err
		})
		if !keep || err != nil {
			return nil, err
		}
		return a, nil
	case c == '"':
		v, err := s.str()
		if !keep || err != nil {
			return nil, err
		}
		return v, nil
	case c == 't':
		return keepIf(keep, true), s.literal("true")
	case c == 'f':
		return keepIf(keep, false), s.literal("false")
	case c == 'n':
		return nil, s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		start := s.i
		if _, _, err := s.number(); err != nil {
			return nil, err
		}
		if !keep {
			return nil, nil
		}
		return json.Number(s.b[start:s.i]), nil
	case s.eof():
		return nil, s.fail("EOF while parsing a value")
	}
	return nil, s.fail("expected value")
}

func keepIf(keep bool, v bool) any {
	if keep {
		return v
	}
	return nil
}

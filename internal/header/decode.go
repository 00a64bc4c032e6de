package header

// decode.go maps the header JSON onto tensors exactly as the reference's serde
// derive does (docs/safetensors.md §2 step 5). The reference declares, in effect,
//
//	{ "__metadata__": Option<HashMap<String,String>>,
//	  #[serde(flatten)] <name>: TensorInfo { dtype, shape, data_offsets } }
//
// and the rules below are what serde makes of that:
//   - the text is one object, with JSON whitespace around it and nothing else;
//   - "__metadata__" (matched after unescaping, case-sensitively) is null or an
//     object of string values, and may appear once; keys inside it may repeat
//     (last wins);
//   - every other key is a tensor, whose value is an object with exactly one
//     each of "dtype", "shape" and "data_offsets" (other keys are ignored), or
//     the 3-element array [dtype, shape, data_offsets] (a serde quirk);
//   - dtype is one of the 22 names, or the single-key object {"F32": null}
//     (another serde quirk); shape is an array of u64; data_offsets is an array
//     of exactly two u64.
//
// Repeated tensor names are kept here and refused by the caller after the
// whole text has parsed, so every JSON error still wins over DuplicateTensor.

import "strconv"

// decoded is the header JSON, before any offset validation.
type decoded struct {
	metadata map[string]string
	tensors  []Tensor // in header order, repeats included
}

// decodeHeader parses the header text b, which starts at file offset base.
// A tensor entry past maxTensors (when above 0) ends it with
// HeaderLimitExceeded, so the cap bounds what decoding allocates.
func decodeHeader(b []byte, base uint64, maxTensors int) (*decoded, error) {
	s := &scanner{b: b, kind: InvalidHeaderDeserialization, base: base}
	s.ws()
	if s.eof() {
		return nil, s.fail("EOF while parsing a value")
	}
	if s.peek() != '{' {
		return nil, s.fail("invalid type: expected a map")
	}
	d := &decoded{}
	seenMeta := false
	err := s.object(func(key string) error {
		if key == "__metadata__" {
			if seenMeta {
				return s.fail("duplicate field `__metadata__`")
			}
			seenMeta = true
			m, err := s.metadata()
			d.metadata = m
			return err
		}
		if maxTensors > 0 && len(d.tensors) == maxTensors {
			return formatErr(HeaderLimitExceeded, "", "the header lists more than "+
				strconv.Itoa(maxTensors)+" tensors, this proxy's limit")
		}
		t, err := s.tensor(key)
		if err != nil {
			return err
		}
		d.tensors = append(d.tensors, t)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.ws()
	if !s.eof() {
		return nil, s.fail("trailing characters")
	}
	return d, nil
}

// metadata reads the value of "__metadata__": null (nil) or a string map.
func (s *scanner) metadata() (map[string]string, error) {
	if s.peek() == 'n' {
		return nil, s.literal("null")
	}
	m := map[string]string{}
	err := s.object(func(k string) error {
		if s.peek() != '"' {
			return s.fail("invalid type: metadata values must be strings")
		}
		v, err := s.str()
		m[k] = v
		return err
	})
	return m, err
}

// tensor reads one tensor entry, in object or array form.
func (s *scanner) tensor(name string) (Tensor, error) {
	t := Tensor{Name: name}
	switch s.peek() {
	case '{':
		var have [3]bool
		field := [3]string{"dtype", "shape", "data_offsets"}
		err := s.object(func(k string) error {
			f := -1
			for i, n := range field {
				if k == n {
					f = i
				}
			}
			if f < 0 {
				return s.skip() // unknown keys are ignored, but must be valid
			}
			if have[f] {
				return s.fail("duplicate field `%s` in tensor %s", k, quote(name))
			}
			have[f] = true
			return s.tensorField(&t, f)
		})
		if err != nil {
			return t, err
		}
		for i, ok := range have {
			if !ok {
				return t, s.fail("missing field `%s` in tensor %s", field[i], quote(name))
			}
		}
		return t, nil
	case '[':
		n := 0
		err := s.array(func(i int) error {
			if i > 2 {
				return s.fail("invalid length: tensor %s as a sequence needs 3 elements", quote(name))
			}
			n++
			return s.tensorField(&t, i)
		})
		if err == nil && n != 3 {
			err = s.fail("invalid length %d: tensor %s as a sequence needs 3 elements", n, quote(name))
		}
		return t, err
	}
	return t, s.fail("invalid type: tensor %s must be an object", quote(name))
}

// tensorField reads field f (0 dtype, 1 shape, 2 data_offsets) into t.
func (s *scanner) tensorField(t *Tensor, f int) error {
	switch f {
	case 0:
		d, err := s.dtype()
		t.DType = d
		return err
	case 1:
		shape := []uint64{}
		err := s.array(func(int) error {
			v, err := s.uint()
			shape = append(shape, v)
			return err
		})
		t.Shape = shape
		return err
	default:
		var off [2]uint64
		n := 0
		err := s.array(func(i int) error {
			if i > 1 {
				return s.fail("invalid length: data_offsets needs 2 elements")
			}
			v, err := s.uint()
			off[i] = v
			n++
			return err
		})
		if err == nil && n != 2 {
			err = s.fail("invalid length %d: data_offsets needs 2 elements", n)
		}
		t.Begin, t.End = off[0], off[1]
		return err
	}
}

// dtype reads a dtype: a known name, or the serde enum form {"NAME": null}.
func (s *scanner) dtype() (DType, error) {
	known := func(name string) (DType, error) {
		d := DType(name)
		if _, ok := d.Bits(); !ok {
			return "", s.fail("unknown variant %s: not a safetensors dtype", quote(name))
		}
		return d, nil
	}
	switch s.peek() {
	case '"':
		name, err := s.str()
		if err != nil {
			return "", err
		}
		return known(name)
	case '{':
		var d DType
		n := 0
		err := s.object(func(k string) error {
			if n++; n > 1 {
				return s.fail("invalid value: dtype map must have a single key")
			}
			var err error
			if d, err = known(k); err != nil {
				return err
			}
			if s.peek() != 'n' {
				return s.fail("invalid type: expected unit (null) as the dtype variant's value")
			}
			return s.literal("null")
		})
		if err == nil && n != 1 {
			err = s.fail("invalid value: dtype map must have a single key")
		}
		return d, err
	}
	return "", s.fail("invalid type: dtype must be a string")
}

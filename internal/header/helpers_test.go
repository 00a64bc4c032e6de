package header

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// file builds a safetensors file: N = len(header), then header, then d data
// bytes (zeros).
func file(header string, d int) []byte {
	return rawFile(uint64(len(header)), append([]byte(header), make([]byte, d)...))
}

// rawFile is an arbitrary 8-byte prefix n followed by rest.
func rawFile(n uint64, rest []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, n)
	return append(b, rest...)
}

// tj renders one tensor entry, compact, as a writer would.
func tj(name string, dtype DType, shape []uint64, begin, end uint64) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = fmt.Sprint(d)
	}
	return fmt.Sprintf(`%q:{"dtype":%q,"shape":[%s],"data_offsets":[%d,%d]}`,
		name, dtype, strings.Join(s, ","), begin, end)
}

// obj wraps entries in braces.
func obj(entries ...string) string { return "{" + strings.Join(entries, ",") + "}" }

func parseBytes(b []byte) (*Header, error) {
	return Parse(bytes.NewReader(b), int64(len(b)), Options{})
}

// checkErr asserts that err is a *FormatError of kind want (0: no error) and,
// when tensor is not "", that it names that tensor.
func checkErr(t *testing.T, err error, want ErrorKind, tensor string) {
	t.Helper()
	if want == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error = %v (%T), want a *FormatError of kind %s", err, err, want.String())
	}
	if fe.Kind != want {
		t.Fatalf("kind = %s (%v), want %s", fe.Kind.String(), err, want.String())
	}
	if !errors.Is(err, want) {
		t.Fatalf("errors.Is(err, %s) is false", want.String())
	}
	if tensor != "" && fe.Tensor != tensor {
		t.Fatalf("tensor = %q, want %q (%v)", fe.Tensor, tensor, err)
	}
}

// u is a shape literal; u() is the scalar shape [] (non-nil, as Parse makes it).
func u(v ...uint64) []uint64 {
	if v == nil {
		return []uint64{}
	}
	return v
}

//go:build !(cuda && cgo && linux)

package gpu

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestUnavailableWithoutTag checks the build without CUDA: Open succeeds,
// Available is false, and every call says why with ErrUnavailable.
func TestUnavailableWithoutTag(t *testing.T) {
	c, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Available() {
		t.Fatal("Available() = true without the cuda tag")
	}
	ctx := context.Background()
	_, err = c.Stage(ctx, 0, []Source{{Name: "x", R: strings.NewReader("x"), Len: 1}}, StageOptions{})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "cuda") {
		t.Errorf("Stage: %v, want ErrUnavailable naming the cuda tag", err)
	}
	_, err = c.Devices()
	checkUnavailable(t, "Devices", err)
	checkUnavailable(t, "Release", c.Release("x"))
	checkUnavailable(t, "ReadBack", c.ReadBack(ctx, "x", 0, make([]byte, 1)))
	_, err = c.Renew("x")
	checkUnavailable(t, "Renew", err)
	_, err = c.Bench(ctx, 0, 1)
	checkUnavailable(t, "Bench", err)
	if ls := c.Leases(); ls != nil {
		t.Errorf("Leases = %v", ls)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func checkUnavailable(t *testing.T, call string, err error) {
	t.Helper()
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("%s: %v, want ErrUnavailable", call, err)
	}
}

package sharedstore

import (
	"context"
	"errors"
	"os"
	"testing"
)

// On NFS v3 a LINK retransmitted after its reply was lost answers EEXIST
// although the first one made the link. create must take that for the
// success it is, or the claim it made would be left with no owner; a name
// that another create holds stays ErrExists.
func TestCreateSeesThroughARetransmittedLink(t *testing.T) {
	b, err := newFile(Location{Dir: t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.link = func(oldname, newname string) error {
		if err := os.Link(oldname, newname); err != nil {
			return err
		}
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: os.ErrExist} // the retransmission's answer
	}
	ctx := context.Background()
	if err := b.create(ctx, "claims/a", []byte("mine")); err != nil {
		t.Fatalf("a create whose link succeeded but answered EEXIST: %v, want success", err)
	}
	b.link = os.Link
	if err := b.create(ctx, "claims/a", []byte("theirs")); !errors.Is(err, ErrExists) {
		t.Fatalf("a second create of a taken name: %v, want ErrExists", err)
	}
	got, err := os.ReadFile(b.path("claims/a"))
	if err != nil || string(got) != "mine" {
		t.Fatalf("the object holds %q, %v; want the first create's bytes", got, err)
	}
}

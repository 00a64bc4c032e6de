package hub

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestParseTensorURL(t *testing.T) {
	for _, tc := range []struct {
		path, query string
		want        TensorURL
		err         bool
		noRoute     bool
	}{
		{path: "/models/org/m/tensors", want: TensorURL{FileRef: FileRef{Rev: "main"}, Kind: TensorList}},
		{path: "/models/gpt2/safetensors", query: "revision=v1&file=a/b.safetensors", want: TensorURL{FileRef: FileRef{Rev: "v1", Path: "a/b.safetensors"}, Kind: TensorSubset}},
		{path: "/models/org/m/tensors/model.layers.0%2Fweight", query: "revision=refs%2Fpr%2F1", want: TensorURL{FileRef: FileRef{Rev: "refs/pr/1"}, Kind: TensorOne, Name: "model.layers.0/weight"}},
		{path: "/models/org/m/resolve/main/x", noRoute: true},
		{path: "/datasets/org/m/tensors", noRoute: true},
		{path: "/models/org/m/tensors/", err: true},
		{path: "/models/org/m/tensors/a%00b", err: true},
		{path: "/models/org/m/tensors", query: "revision=..", err: true},
		{path: "/models/org/m/tensors", query: "file=../x", err: true},
		{path: "/models/../tensors", err: true},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := ParseTensorURL(tc.path, q)
		switch {
		case tc.noRoute:
			if !errors.Is(err, ErrNoRoute) {
				t.Errorf("%s: %v, want ErrNoRoute", tc.path, err)
			}
		case tc.err:
			if err == nil || errors.Is(err, ErrNoRoute) {
				t.Errorf("%s?%s: %+v, %v; want an invalid-URL error", tc.path, tc.query, got, err)
			}
		case err != nil:
			t.Errorf("%s?%s: %v", tc.path, tc.query, err)
		default:
			got.Repo = Repo{}
			if got != tc.want {
				t.Errorf("%s?%s = %+v, want %+v", tc.path, tc.query, got, tc.want)
			}
		}
	}
}

// The tensor routes are hubproxy's own: a parameter they do not take is
// refused (a typo ignored would change what is served), naming it and,
// when it is one edit or two from one they take, that one. file= must name
// a safetensors file or index.
func TestParseTensorURLRefusesUnknownParameters(t *testing.T) {
	for _, tc := range []struct {
		path, query string
		want        []string // in the message; nil: accepted
	}{
		{"/models/org/m/tensors/w", "shards=0:0/4", []string{`"shards"`, "did you mean shard for shards?"}},
		{"/models/org/m/tensors/w", "shard=0:0/4&slize=0:1", []string{`"slize"`, "did you mean slice"}},
		{"/models/org/m/tensors/w", "Revision=main", []string{`"Revision"`, "did you mean revision"}},
		{"/models/org/m/tensors", "shard=0:0/4", []string{`"shard"`, "takes only revision, file"}},
		{"/models/org/m/tensors", "download=true&zz=1", []string{`"download, zz"`}},
		{"/models/org/m/safetensors", "names=a", []string{"did you mean name for names?"}},
		{"/models/org/m/safetensors", "name=a&prefix=b&revision=v1&file=x.safetensors", nil},
		{"/models/org/m/tensors/w", "revision=main&file=x.safetensors&shard=0:0/2", nil},
		{"/models/org/m/tensors/w", "slice=0:1", nil},
		{"/models/org/m/tensors", "file=config.json", []string{`invalid file "config.json"`, ".safetensors"}},
		{"/models/org/m/tensors", "file=pytorch_model.bin.index.json", []string{"invalid file"}},
		{"/models/org/m/tensors", "file=unet/diffusion_pytorch_model.safetensors.index.json", nil},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, err := ParseTensorURL(tc.path, q)
		var ie *InvalidError
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s?%s: %v", tc.path, tc.query, err)
		case tc.want != nil && !errors.As(err, &ie):
			t.Errorf("%s?%s: %v, want an *InvalidError", tc.path, tc.query, err)
		case tc.want != nil:
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s?%s: %q does not say %q", tc.path, tc.query, err, w)
				}
			}
		}
	}
	// Far from every name: no suggestion.
	q, _ := url.ParseQuery("frobnicate=1")
	if _, err := ParseTensorURL("/models/org/m/tensors/w", q); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("frobnicate: %v, want a refusal without a suggestion", err)
	}
	// A file route under /models/ is not a tensor route: unknown
	// parameters are left to it (and ignored, as the Hub ignores them).
	q, _ = url.ParseQuery("download=true")
	if _, err := ParseTensorURL("/models/x/resolve/main/f", q); !errors.Is(err, ErrNoRoute) {
		t.Errorf("a /models/ file URL: %v, want ErrNoRoute", err)
	}
}

func FuzzParseTensorURL(f *testing.F) {
	f.Add("/models/org/m/tensors/model.layers.0.weight", "revision=main&shard=0:1/2")
	f.Add("/models/gpt2/safetensors", "name=a&prefix=b")
	f.Fuzz(func(t *testing.T, p, q string) {
		values, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		tu, err := ParseTensorURL(p, values)
		if err != nil {
			return
		}
		if _, err := ParseRepo(Model, tu.Repo.ID()); err != nil || ValidRevision(tu.Rev) != nil {
			t.Fatalf("accepted invalid repo %q or revision %q", tu.Repo.ID(), tu.Rev)
		}
		if tu.Path != "" && ValidPath(tu.Path) != nil || len(tu.Name) > MaxTensorName {
			t.Fatalf("accepted invalid file %q or name", tu.Path)
		}
	})
}

func TestPassThroughRepo(t *testing.T) {
	for in, want := range map[string]string{
		"/api/models/org/m/refs":        "org/m",
		"/api/datasets/org/d/commits/x": "org/d",
		"/api/models/gpt2":              "",
		"/api/other/org/m/x":            "",
		"/org/m/resolve/main/x":         "",
	} {
		r, ok := PassThroughRepo(in)
		if ok != (want != "") || ok && r.ID() != want {
			t.Errorf("PassThroughRepo(%q) = %v, %v; want %q", in, r, ok, want)
		}
	}
}

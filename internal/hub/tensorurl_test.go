package hub

import (
	"errors"
	"net/url"
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

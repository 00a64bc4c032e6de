package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/hubproxy/hubproxy/internal/app"
	"github.com/hubproxy/hubproxy/internal/dirhub"
	"github.com/hubproxy/hubproxy/internal/inproc"
)

// hubproxy demo writes a small synthetic Llama-shaped model (random BF16
// weights in two safetensors shards, with config and index) into a folder,
// and serves it through hubproxy with that folder as upstream (dirhub), so
// the quick start works without internet or a Hugging Face account.

const demoRepo = "demo/tiny-llama"

type demoOptions struct {
	listen   string
	dir      string // upstream root; "" = a temp dir, removed on exit
	cacheDir string // "" = a temp dir, removed on exit
	logLevel string
}

func newDemoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Serve a small synthetic model through hubproxy, offline",
		Long: `demo writes a tiny synthetic model, ` + demoRepo + ` (random weights, two safetensors
shards), into --dir and serves it through hubproxy exactly as
"hubproxy serve --upstream dir:DIR" would: no internet or hub account needed.
It prints curl commands to try, and runs until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runDemo(ctx, o, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address to serve on")
	f.StringVar(&o.dir, "dir", "", "folder to write the model repo into and serve as upstream (default: a temporary folder)")
	f.StringVar(&o.cacheDir, "cache-dir", "", "cache folder (default: a temporary folder)")
	f.StringVar(&o.logLevel, "log-level", "warn", "debug, info, warn or error")
	return cmd
}

// runDemo writes the model, serves it until ctx ends, then cleans up.
func runDemo(ctx context.Context, o demoOptions, out io.Writer) error {
	log, err := newLogger(o.logLevel, "text")
	if err != nil {
		return err
	}
	for _, d := range []*string{&o.dir, &o.cacheDir} {
		if *d == "" {
			tmp, err := os.MkdirTemp("", "hubproxy-demo-*")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			*d = tmp
		}
	}
	if err := writeDemoRepo(filepath.Join(o.dir, filepath.FromSlash(demoRepo))); err != nil {
		return fmt.Errorf("writing the demo model: %w", err)
	}
	hubDir, err := dirhub.New(o.dir, dirhub.Options{Logger: log})
	if err != nil {
		return err
	}
	defer hubDir.Close()
	cfg := app.Defaults()
	cfg.Listen, cfg.CacheDir, cfg.MinFreeBytes = o.listen, o.cacheDir, 0
	cfg.Upstream, cfg.Transport = dirhub.URL, inproc.Transport(hubDir)
	built, err := app.Build(cfg, log)
	if err != nil {
		return err
	}
	defer built.Close()

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: built.Main, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	printDemoHelp(out, ln.Addr(), o)

	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func printDemoHelp(w io.Writer, addr net.Addr, o demoOptions) {
	host, port, _ := net.SplitHostPort(addr.String())
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "localhost"
	}
	base := "http://" + net.JoinHostPort(host, port)
	fmt.Fprintf(w, `hubproxy demo: serving the synthetic model %[2]s from %[3]s
(a local folder, no internet needed; cache in %[4]s)

Listening on %[1]s. Try:

  # file metadata, as hf_hub_download asks for it
  curl -I %[1]s/%[2]s/resolve/main/config.json
  # every tensor, read from the safetensors headers only
  curl %[1]s/models/%[2]s/tensors
  # one tensor's bytes (BF16; dtype and shape in the X-Tensor-* headers)
  curl -D - -o norm.bin %[1]s/models/%[2]s/tensors/model.norm.weight
  # a hub client (pip install huggingface_hub)
  HF_ENDPOINT=%[1]s python -c 'from huggingface_hub import snapshot_download; print(snapshot_download("%[2]s"))'

Press Ctrl-C to stop.
`, base, demoRepo, o.dir, o.cacheDir)
}

// demoTensor is one tensor of the demo model.
type demoTensor struct {
	name  string
	shape []int64
	data  []byte // BF16, little-endian
}

// Dimensions of the demo model: a 2-layer Llama with hidden size 64.
const (
	demoHidden = 64
	demoInter  = 128
	demoVocab  = 256
	demoLayers = 2
)

// demoShards returns the demo model's tensors, shard by shard: embeddings
// and layer 0, then layer 1, the final norm and the LM head. The weights
// are deterministic pseudo-random values (norms are ones).
func demoShards() [][]demoTensor {
	mat := func(name string, rows, cols int64) demoTensor {
		return demoTensor{name: name, shape: []int64{rows, cols}, data: bf16Random(name, rows*cols, 0.02)}
	}
	norm := func(name string) demoTensor {
		return demoTensor{name: name, shape: []int64{demoHidden}, data: bf16Ones(demoHidden)}
	}
	layer := func(i int) []demoTensor {
		p := "model.layers." + strconv.Itoa(i) + "."
		return []demoTensor{
			norm(p + "input_layernorm.weight"),
			mat(p+"mlp.down_proj.weight", demoHidden, demoInter),
			mat(p+"mlp.gate_proj.weight", demoInter, demoHidden),
			mat(p+"mlp.up_proj.weight", demoInter, demoHidden),
			norm(p + "post_attention_layernorm.weight"),
			mat(p+"self_attn.k_proj.weight", demoHidden, demoHidden),
			mat(p+"self_attn.o_proj.weight", demoHidden, demoHidden),
			mat(p+"self_attn.q_proj.weight", demoHidden, demoHidden),
			mat(p+"self_attn.v_proj.weight", demoHidden, demoHidden),
		}
	}
	first := append([]demoTensor{mat("model.embed_tokens.weight", demoVocab, demoHidden)}, layer(0)...)
	second := append(layer(1), norm("model.norm.weight"), mat("lm_head.weight", demoVocab, demoHidden))
	return [][]demoTensor{first, second}
}

// bf16Random is n normally distributed values (stddev std), seeded by name.
func bf16Random(name string, n int64, std float64) []byte {
	var seed [32]byte
	copy(seed[:], name)
	r := rand.New(rand.NewChaCha8(seed))
	b := make([]byte, 2*n)
	for i := range n {
		bits := math.Float32bits(float32(r.NormFloat64() * std))
		binary.LittleEndian.PutUint16(b[2*i:], uint16(bits>>16)) // BF16 is the top half of an F32
	}
	return b
}

func bf16Ones(n int64) []byte {
	b := make([]byte, 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(b[2*i:], 0x3f80)
	}
	return b
}

// safetensorsFile lays out tensors as the format requires: an 8-byte
// little-endian header length, a JSON header (padded with spaces to a
// multiple of 8) giving each tensor's dtype, shape and byte offsets, then
// the data back to back, in name order.
func safetensorsFile(tensors []demoTensor) []byte {
	sorted := append([]demoTensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].name < sorted[j].name })
	var hdr bytes.Buffer
	hdr.WriteString(`{"__metadata__":{"format":"pt"}`)
	var off int
	for _, t := range sorted {
		name, _ := json.Marshal(t.name)
		shape, _ := json.Marshal(t.shape)
		fmt.Fprintf(&hdr, `,%s:{"dtype":"BF16","shape":%s,"data_offsets":[%d,%d]}`, name, shape, off, off+len(t.data))
		off += len(t.data)
	}
	hdr.WriteByte('}')
	for hdr.Len()%8 != 0 {
		hdr.WriteByte(' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(hdr.Len()))
	out = append(out, hdr.Bytes()...)
	for _, t := range sorted {
		out = append(out, t.data...)
	}
	return out
}

// writeDemoRepo writes the demo repository into dir (created if needed).
func writeDemoRepo(dir string) error {
	shards := demoShards()
	files := map[string][]byte{}
	weightMap := map[string]string{}
	var total int
	for i, ts := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		files[name] = safetensorsFile(ts)
		for _, t := range ts {
			weightMap[t.name] = name
			total += len(t.data)
		}
	}
	index, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	files["model.safetensors.index.json"] = index
	files["config.json"] = []byte(fmt.Sprintf(`{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": %d,
  "intermediate_size": %d,
  "num_hidden_layers": %d,
  "num_attention_heads": 4,
  "num_key_value_heads": 4,
  "vocab_size": %d,
  "max_position_embeddings": 128,
  "rms_norm_eps": 1e-05,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16"
}
`, demoHidden, demoInter, demoLayers, demoVocab))
	files["generation_config.json"] = []byte(`{"bos_token_id": 1, "eos_token_id": 2}` + "\n")
	files["README.md"] = []byte("# tiny-llama (hubproxy demo)\n\nA synthetic 2-layer Llama with random BF16 weights, written by `hubproxy demo`.\nIt is for trying hubproxy offline; it generates nothing useful.\n")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

package ranges

import (
	"encoding/json"
	"math/rand/v2"
	"slices"
	"testing"
)

func set(rs ...Range) Set {
	var s Set
	for _, r := range rs {
		s.Insert(r)
	}
	return s
}

func TestInsert(t *testing.T) {
	tests := []struct {
		name string
		have []Range
		add  Range
		want []Range
	}{
		{"into empty", nil, Range{10, 20}, []Range{{10, 20}}},
		{"empty range", []Range{{0, 5}}, Range{7, 7}, []Range{{0, 5}}},
		{"inverted range", []Range{{0, 5}}, Range{9, 7}, []Range{{0, 5}}},
		{"before", []Range{{10, 20}}, Range{0, 5}, []Range{{0, 5}, {10, 20}}},
		{"after", []Range{{10, 20}}, Range{25, 30}, []Range{{10, 20}, {25, 30}}},
		{"touching left", []Range{{10, 20}}, Range{5, 10}, []Range{{5, 20}}},
		{"touching right", []Range{{10, 20}}, Range{20, 30}, []Range{{10, 30}}},
		{"overlap left", []Range{{10, 20}}, Range{5, 15}, []Range{{5, 20}}},
		{"inside", []Range{{10, 20}}, Range{12, 15}, []Range{{10, 20}}},
		{"covering", []Range{{10, 20}}, Range{0, 30}, []Range{{0, 30}}},
		{"bridges two", []Range{{0, 10}, {20, 30}}, Range{10, 20}, []Range{{0, 30}}},
		{"bridges many", []Range{{0, 1}, {2, 3}, {4, 5}, {9, 10}}, Range{1, 5}, []Range{{0, 5}, {9, 10}}},
		{"between", []Range{{0, 10}, {20, 30}}, Range{12, 18}, []Range{{0, 10}, {12, 18}, {20, 30}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set(tt.have...)
			s.Insert(tt.add)
			if got := s.Ranges(); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name string
		have []Range
		del  Range
		want []Range
	}{
		{"from empty", nil, Range{0, 10}, nil},
		{"empty range", []Range{{0, 10}}, Range{5, 5}, []Range{{0, 10}}},
		{"miss between", []Range{{0, 10}, {20, 30}}, Range{10, 20}, []Range{{0, 10}, {20, 30}}},
		{"split", []Range{{0, 30}}, Range{10, 20}, []Range{{0, 10}, {20, 30}}},
		{"head", []Range{{0, 30}}, Range{0, 10}, []Range{{10, 30}}},
		{"tail", []Range{{0, 30}}, Range{20, 40}, []Range{{0, 20}}},
		{"whole", []Range{{0, 30}}, Range{0, 30}, nil},
		{"spanning", []Range{{0, 10}, {20, 30}, {40, 50}}, Range{5, 45}, []Range{{0, 5}, {45, 50}}},
		{"exact middle", []Range{{0, 10}, {20, 30}, {40, 50}}, Range{20, 30}, []Range{{0, 10}, {40, 50}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := set(tt.have...)
			s.Remove(tt.del)
			if got := s.Ranges(); !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestPresentMissing(t *testing.T) {
	s := set(Range{10, 20}, Range{30, 40})
	tests := []struct {
		r       Range
		present bool
		missing []Range
	}{
		{Range{10, 20}, true, nil},
		{Range{12, 18}, true, nil},
		{Range{15, 15}, true, nil},
		{Range{0, 10}, false, []Range{{0, 10}}},
		{Range{5, 15}, false, []Range{{5, 10}}},
		{Range{15, 35}, false, []Range{{20, 30}}},
		{Range{0, 50}, false, []Range{{0, 10}, {20, 30}, {40, 50}}},
		{Range{20, 30}, false, []Range{{20, 30}}},
		{Range{39, 41}, false, []Range{{40, 41}}},
		{Range{40, 60}, false, []Range{{40, 60}}},
	}
	for _, tt := range tests {
		if got := s.Present(tt.r); got != tt.present {
			t.Errorf("Present(%v) = %v, want %v", tt.r, got, tt.present)
		}
		if got := s.Missing(tt.r); !slices.Equal(got, tt.missing) {
			t.Errorf("Missing(%v) = %v, want %v", tt.r, got, tt.missing)
		}
	}
	if got := s.Size(); got != 20 {
		t.Errorf("Size = %d, want 20", got)
	}
}

func TestRangeHelpers(t *testing.T) {
	if got := (Range{5, 3}).Size(); got != 0 {
		t.Errorf("inverted Size = %d", got)
	}
	if got := (Range{0, 10}).Intersect(Range{5, 20}); got != (Range{5, 10}) {
		t.Errorf("Intersect = %v", got)
	}
	if got := (Range{0, 10}).Intersect(Range{10, 20}); !got.IsEmpty() {
		t.Errorf("Intersect of adjacent = %v, want empty", got)
	}
	if got := (Range{1, 2}).String(); got != "[1,2)" {
		t.Errorf("String = %q", got)
	}
}

func TestJSON(t *testing.T) {
	s := set(Range{0, 10}, Range{20, 30})
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `[{"pos":0,"end":10},{"pos":20,"end":30}]` {
		t.Errorf("Marshal = %s", b)
	}
	var back Set
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Ranges(), s.Ranges()) {
		t.Errorf("round trip = %v", back.Ranges())
	}
	var empty Set
	if b, _ := json.Marshal(empty); string(b) != "[]" {
		t.Errorf("empty Marshal = %s", b)
	}

	// Unsorted, overlapping input is normalised.
	if err := json.Unmarshal([]byte(`[{"pos":20,"end":30},{"pos":0,"end":10},{"pos":5,"end":21}]`), &back); err != nil {
		t.Fatal(err)
	}
	if want := []Range{{0, 30}}; !slices.Equal(back.Ranges(), want) {
		t.Errorf("normalised = %v, want %v", back.Ranges(), want)
	}
	for _, bad := range []string{`[{"pos":-1,"end":3}]`, `[{"pos":5,"end":3}]`, `{"pos":1}`, `nope`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

// checkInvariants fails t unless s is sorted, non-overlapping, non-adjacent,
// free of empty ranges, and equal to the bitmap model.
func checkInvariants(t *testing.T, s *Set, model []bool) {
	t.Helper()
	rs := s.Ranges()
	for i, r := range rs {
		if r.IsEmpty() {
			t.Fatalf("empty range %v in %v", r, rs)
		}
		if i > 0 && rs[i-1].End >= r.Pos {
			t.Fatalf("ranges %v and %v overlap or touch in %v", rs[i-1], r, rs)
		}
	}
	var n int64
	for i, b := range model {
		if b {
			n++
		}
		if got := s.Present(Range{int64(i), int64(i) + 1}); got != b {
			t.Fatalf("byte %d: Present = %v, model %v (set %v)", i, got, b, rs)
		}
	}
	if s.Size() != n {
		t.Fatalf("Size = %d, model %d", s.Size(), n)
	}
}

func TestRandomInsertRemove(t *testing.T) {
	const size = 512
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 20 {
		var s Set
		model := make([]bool, size)
		for step := range 200 {
			a, b := rng.IntN(size+1), rng.IntN(size+1)
			r := Range{int64(min(a, b)), int64(max(a, b))}
			// Mostly inserts, so sets grow dense enough to exercise merging.
			insert := rng.IntN(4) != 0
			if insert {
				s.Insert(r)
			} else {
				s.Remove(r)
			}
			for i := r.Pos; i < r.End; i++ {
				model[i] = insert
			}
			checkInvariants(t, &s, model)

			// Missing must list exactly the model's gaps inside a random query.
			c, d := rng.IntN(size+1), rng.IntN(size+1)
			q := Range{int64(min(c, d)), int64(max(c, d))}
			var want []Range
			for i := q.Pos; i < q.End; i++ {
				if model[i] {
					continue
				}
				if len(want) > 0 && want[len(want)-1].End == i {
					want[len(want)-1].End++
				} else {
					want = append(want, Range{i, i + 1})
				}
			}
			if got := s.Missing(q); !slices.Equal(got, want) {
				t.Fatalf("round %d step %d: Missing(%v) = %v, want %v", round, step, q, got, want)
			}
			if got := s.Present(q); got != (len(want) == 0) {
				t.Fatalf("round %d step %d: Present(%v) = %v, missing %v", round, step, q, got, want)
			}
		}
	}
}

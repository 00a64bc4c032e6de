package harness

import (
	"fmt"
	"strings"
)

// The S3 scenario's columns, as the report names them.
const (
	// ColS3 is hubproxy's S3 API (serve --s3-listen), path-style, unsigned.
	ColS3 = "hubproxy S3 API"
	// ColMinio is MinIO serving the same file, uploaded into it, from its
	// own disk: the object store the S3 API stands in for.
	ColMinio = "MinIO"
	// ColHub is the same hubproxy's hub routes (/resolve/), the front door
	// the S3 API must not be slower than on a cold file.
	ColHub = "hubproxy hub routes"
)

// s3Columns is the S3 table's column order.
func s3Columns() []string { return []string{ColS3, ColMinio, ColHub} }

// S3Bench is scenario 11's result: warm reads through the S3 API against
// MinIO, and cold reads through the S3 API against the hub routes.
// Measure.Samples is keyed by the Col names; each measure has ColS3 and one
// peer column.
type S3Bench struct {
	Size     int64 // the file's size
	Range    int64 // the ranged GETs' size
	Measures []Measure
}

// s3Peer is the column m divides ColS3 by: MinIO for the warm rows, the hub
// routes for the cold ones; "" when m has neither.
func s3Peer(m Measure) string {
	for _, c := range []string{ColMinio, ColHub} {
		if len(m.Samples[c]) > 0 {
			return c
		}
	}
	return ""
}

// s3RatioCell is ColS3's median over m's peer's, with the column it favours.
func s3RatioCell(m Measure) string {
	p := s3Peer(m)
	if p == "" {
		return "—"
	}
	return clusterRatioCell(m, ColS3, p)
}

// markdown is the S3 section: what runs, then one row per measure with the
// raw figures by column and the S3 API's ratio to its peer.
func (s *S3Bench) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Every request is a plain unsigned HTTP/1.1 GET (the harness's own load generator; no SDK, no signing), path-style. "+
		"Warm: the %s file in hubproxy's cache (left there by the cold runs) against the same bytes uploaded into MinIO, "+
		"read back whole once from each and checked before the runs; ranged GETs of %s at random offsets, each 206 of exactly that length, "+
		"on keep-alive connections for the run's duration, and whole-object GETs back to back on one connection. "+
		"Throughput is bytes over the run's wall time; p99 is per request. Cold: a fresh hubproxy with an empty cache, one whole-object GET "+
		"through the S3 API, against the same through /resolve/ on another fresh one; upstream bytes are the file bytes the fake hub and its "+
		"CDN sent, over the file's size.\n\n",
		sizeName(s.Size), sizeName(s.Range))
	cols := s3Columns()
	b.WriteString("| Pattern | Metric | Unit |")
	for _, c := range cols {
		fmt.Fprintf(&b, " %s |", c)
	}
	b.WriteString(" S3 API / peer | Better | Note |\n|---|---|---|" + strings.Repeat("---|", len(cols)) + "---|---|---|\n")
	for _, m := range s.Measures {
		fmt.Fprintf(&b, "| %s | %s | %s", m.Title, m.Metric, m.Unit)
		for _, c := range cols {
			fmt.Fprintf(&b, " | %s", cell(summarize(m.Samples[c])))
		}
		fmt.Fprintf(&b, " | %s | %s | %s |\n", s3RatioCell(m), m.Better, m.Note)
	}
	return b.String()
}

// headline is the S3 section's sentence for the headline: every headline
// measure's ratio to its peer.
func (s *S3Bench) headline() string {
	var parts []string
	for _, m := range s.Measures {
		if !m.Headline || s3Peer(m) == "" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s, %s %s× %s", m.Title, m.Metric, sig(ratio(summarize(m.Samples[ColS3]), summarize(m.Samples[s3Peer(m)]))), s3Peer(m)))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("S3 API on a %s file: %s.\n", sizeName(s.Size), strings.Join(parts, "; "))
}

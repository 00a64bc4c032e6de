package sharedfill

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
)

// A chunk object is the chunk's bytes followed by a trailer: the id of the
// secret that sealed it (secretIDLen bytes) and an HMAC-SHA256 tag under
// the cluster's shared secret. The tag covers the layout version, the
// file's content hash, the chunk size, the chunk's index and length, the
// secret id and the bytes, so an object is good only at the one key it was
// put at: an object copied from another chunk, another file or another
// chunk size fails, and so does anything written by whoever can write the
// store (a bucket's credentials, an RWX volume) but does not hold the
// secret. An unkeyed digest, as layout v2 had, stopped accidents only:
// anyone able to write an object could write its sha256 too, and every
// node then served their bytes to range and tensor readers.
//
// The secret id is there only to say why a chunk fails: a node whose
// secret differs from the cluster's sees every chunk as forged, and the id
// tells that apart from a forgery (which could copy an id, but gains
// nothing by it: the tag still fails).
const (
	// MinSecretLen is the least key material a secret must hold.
	MinSecretLen = 32
	secretIDLen  = 8
	tagLen       = sha256.Size
	trailerLen   = secretIDLen + tagLen
)

// sealer seals and checks chunk objects under one secret.
type sealer struct {
	macKey []byte
	id     [secretIDLen]byte
}

// newSealer derives the MAC key and the secret's id from secret. Keys are
// derived (never the secret itself), so the id, which objects and logs
// show, says nothing of the key.
func newSealer(secret []byte) (sealer, error) {
	if len(secret) < MinSecretLen {
		return sealer{}, fmt.Errorf("sharedfill: the shared-store secret holds %d bytes; at least %d are needed", len(secret), MinSecretLen)
	}
	s := sealer{macKey: derive(secret, "hubproxy shared-store chunk mac")}
	copy(s.id[:], derive(secret, "hubproxy shared-store secret id"))
	return s, nil
}

func derive(secret []byte, label string) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(label))
	return m.Sum(nil)
}

// SecretID is the id of a secret as chunk objects and logs show it: nodes
// that log different ids do not share chunks (each rejects the others').
func SecretID(secret []byte) string {
	return hex.EncodeToString(derive(secret, "hubproxy shared-store secret id")[:secretIDLen])
}

func (s sealer) idString() string { return hex.EncodeToString(s.id[:]) }

// tag is the MAC of chunk id's bytes, sealed under secret id sid.
func (s sealer) tag(id chunkID, chunkSize int64, sid, data []byte) []byte {
	m := hmac.New(sha256.New, s.macKey)
	hdr := make([]byte, 0, 128)
	hdr = append(hdr, layoutPrefix...)
	hdr = append(hdr, id.etag...)
	hdr = append(hdr, 0) // an etag never holds a NUL: the fields cannot run together
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(chunkSize))
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(id.index))
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(len(data)))
	hdr = append(hdr, sid...)
	m.Write(hdr)
	m.Write(data)
	return m.Sum(nil)
}

// seal appends the trailer of chunk id to buf: the object to put. Callers
// allocate buf with room for it, so this does not copy the chunk.
func (s sealer) seal(id chunkID, chunkSize int64, buf []byte) []byte {
	t := s.tag(id, chunkSize, s.id[:], buf)
	return append(append(buf, s.id[:]...), t...)
}

// verdict is what unseal found.
type verdict int

const (
	sealOK          verdict = iota
	sealBadSize             // not the size chunk id's object must be
	sealBadMAC              // claims this node's secret, but its tag is wrong
	sealOtherSecret         // sealed (or made to look sealed) under another secret
)

// unseal returns the chunk an object of chunk id, of size bytes, holds, and
// whether it is that chunk as a holder of this node's secret put it; with
// sealOtherSecret also the id the object names.
func (s sealer) unseal(id chunkID, chunkSize, size int64, obj []byte) ([]byte, verdict, string) {
	if int64(len(obj)) != size+trailerLen {
		return nil, sealBadSize, ""
	}
	data, sid, got := obj[:size], obj[size:size+secretIDLen], obj[size+secretIDLen:]
	if !hmac.Equal(sid, s.id[:]) {
		return nil, sealOtherSecret, hex.EncodeToString(sid)
	}
	if !hmac.Equal(got, s.tag(id, chunkSize, sid, data)) {
		return nil, sealBadMAC, ""
	}
	return data, sealOK, ""
}

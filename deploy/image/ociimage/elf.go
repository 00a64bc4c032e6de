package ociimage

import (
	"bytes"
	"debug/elf"
	"errors"
	"fmt"
)

// errNotStatic: the image has no libc, so a dynamically linked binary (cgo,
// -tags cuda) would fail at exec with a bare "no such file or directory".
var errNotStatic = errors.New("binary is dynamically linked; the image has no libc: build it with CGO_ENABLED=0 (the CUDA variant is Dockerfile.cuda)")

// goarch maps ELF machines to the platform architecture the image declares.
var goarch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// inspectBinary checks that b is a static Linux executable and returns its
// architecture, so the image's platform is read off the binary instead of
// being declared separately (and possibly wrongly).
func inspectBinary(b []byte) (arch string, err error) {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return "", fmt.Errorf("binary is not an ELF executable: %w", err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("binary is an ELF %s, not an executable", f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", errNotStatic
		}
	}
	arch, ok := goarch[f.Machine]
	if !ok {
		return "", fmt.Errorf("binary is for %s, which the image builder does not map to a platform", f.Machine)
	}
	return arch, nil
}

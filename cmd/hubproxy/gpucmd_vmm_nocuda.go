//go:build !(cuda && cgo && linux)

package main

import (
	"context"
	"errors"
	"io"
)

var errVMMCheckNeedsCUDA = errors.New("gpu vmmcheck needs a binary built with -tags cuda (make build-cuda)")

func runVMMCheck(context.Context, io.Writer, vmmCheckOptions) error { return errVMMCheckNeedsCUDA }

func runVMMChild(context.Context, vmmCheckOptions) error { return errVMMCheckNeedsCUDA }

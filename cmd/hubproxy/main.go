// Command hubproxy is a caching, tensor-aware proxy for the Hugging Face Hub.
// main stays thin: it builds the cobra command tree and exits with its error.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "hubproxy:", err)
		os.Exit(1)
	}
}

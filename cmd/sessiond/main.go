// Command sessiond runs the durable agent Session runtime.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "sessiond:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	return fmt.Errorf("no command yet (%v)", args)
}

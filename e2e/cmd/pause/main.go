// Command pause is the pod sandbox's process: it sleeps until it is told to
// stop, like Kubernetes' own pause image, and reaps nothing (the sandbox shares
// no PID namespace here).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
}

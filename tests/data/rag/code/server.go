package main

import (
	"fmt"
	"net/http"
)

// healthHandler answers the load balancer's liveness probe.
func healthHandler(w http.ResponseWriter, r *http.Request) {
	w.WriteHeader(http.StatusOK)
	fmt.Fprintln(w, "ok")
}

func main() {
	http.HandleFunc("/healthz", healthHandler)

	if err := http.ListenAndServe(":8080", nil); err != nil {
		panic(err)
	}
}

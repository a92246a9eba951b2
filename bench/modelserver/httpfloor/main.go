// Command httpfloor is the benchmark's HTTP floor: a fasthttp server that
// answers every request with a constant answer the size of the benchmark
// model's, doing no work at all. What it and wrk spend per request is what
// any HTTP server on this machine spends before it runs a handler; with the
// direct loop's cost of the handlers it bounds the throughput any server
// can reach here (bench/modelserver/bench.py prints that ceiling).
//
//	go run ./bench/modelserver/httpfloor -addr 127.0.0.1:8080
package main

import (
	"flag"
	"log"
	"net"

	"github.com/valyala/fasthttp"
)

// answer is a typical answer of the benchmark model: ten floats as JSON.
const answer = `{"outputs": [[0.05207335948944092, -0.0872422307729721, 0.1291484385728836, ` +
	`0.07301691174507141, -0.1107383593916893, 0.02637186087667942, -0.04522281885147095, ` +
	`0.1005236655473709, -0.06404700875282288, 0.01903839409351349]]}`

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	body := []byte(answer)
	srv := &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentType("application/json")
			ctx.SetBody(body)
		},
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
	}
	log.Fatal(srv.Serve(ln))
}

package grpcapi

import (
	"math"
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
)

// windowSize is the HTTP/2 flow-control window of every stream and of the
// connection, in both directions, where grpc-go starts at 64 KiB and grows
// the window from its bandwidth-delay estimate, with a ping beside the
// data of each call to measure it. A 4 MiB tensor then waits for window
// updates on the way, and a small call costs its ping and its ack; a
// window of 16 MiB (the estimate's ceiling in grpc-go) lets a tensor of
// that size go out at once. What a peer can make the server hold is not
// more than before: messages of up to INT32_MAX bytes are accepted anyway.
const windowSize = 16 << 20

// transportOptions are the server's HTTP/2 settings for large tensors:
// the windows above and a pool of buffers that are not cleared
// (dirtyPool).
func transportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(windowSize),
		grpc.InitialConnWindowSize(windowSize),
		experimental.BufferPool(newDirtyPool()),
	}
}

// DialOptions are the options of a client of this server that sends and
// receives large tensors as cheaply as grpc-go allows: plaintext, no
// message size limit short of gRPC's (INT32_MAX, as Triton's), the
// server's flow-control windows, buffers that are not cleared, and a
// codec that sends raw_input_contents from the caller's buffers and
// reads raw_output_contents without copying them out of the message.
// Add transport credentials to use TLS.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(windowSize),
		grpc.WithInitialConnWindowSize(windowSize),
		experimental.WithBufferPool(newDirtyPool()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32),
			grpc.ForceCodecV2(newInferCodec())),
	}
}

// Size classes of dirtyPool: powers of two from 2^minClass to 2^maxClass
// bytes; larger buffers are allocated and dropped.
const minClass, maxClass = 8, 24

// dirtyPool is a mem.BufferPool of power-of-two size classes whose buffers
// keep whatever they held. grpc-go reads HTTP/2 frames into them and
// fills each before it is read, so they need not be cleared as
// mem.DefaultBufferPool's are when reused (a 4 MiB tensor arrives in 256
// frames of 16 KiB, each cleared before it was filled).
type dirtyPool struct {
	classes [maxClass - minClass + 1]sync.Pool
}

func newDirtyPool() mem.BufferPool { return &dirtyPool{} }

// Get returns a buffer of length n, capacity the size class's.
func (p *dirtyPool) Get(n int) *[]byte {
	c := max(bits.Len(uint(n-1)), minClass) // the smallest class holding n
	if n <= 0 {
		c = minClass
	}
	if c > maxClass {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.classes[c-minClass].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<c)
	return &b
}

// Put keeps b in the largest class its capacity holds.
func (p *dirtyPool) Put(b *[]byte) {
	c := bits.Len(uint(cap(*b))) - 1
	if c < minClass || c > maxClass {
		return
	}
	p.classes[c-minClass].Put(b)
}

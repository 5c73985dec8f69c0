package grpcapi

import (
	"compress/zlib"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/gzip" // registers "gzip"

	pb "github.com/inferd/inferd/platforms/grpcapi/inferencepb"
)

// Deflate is the gRPC "deflate" message encoding: a zlib-wrapped (RFC 1950)
// stream, as gRPC core and the Python client write it (zlib_compress in
// grpc/grpc src/core/lib/compression/message_compress.cc).
// grpc-go has no such codec; this package registers one.
const Deflate = "deflate"

// Both message encodings inflate under a bound (boundedInflate): grpc-go
// inflates a message up to the receive limit, Triton's INT32_MAX, so a
// 2 MB gzip body of zeros would cost the server 2 GiB before anything
// looks at it. grpc-go's own gzip has been registered by the import above.
func init() {
	encoding.RegisterCompressor(boundedInflate{encoding.GetCompressor("gzip")})
	encoding.RegisterCompressor(boundedInflate{&deflate{}})
}

// A compressed message may inflate to at most the larger of minInflate
// bytes and inflateRatio times its compressed size: tensors compress far
// less than 32 to 1 (zeros and other constants aside), and a message of
// tens of MiB takes no ratio at all, while a bomb's 1,000 to 1 costs no
// more than minInflate. Uncompressed messages are not affected.
const (
	minInflate   = 64 << 20
	inflateRatio = 32
)

// boundedInflate is a Compressor whose inflated messages stop at their
// bound with an error (which grpc-go answers INTERNAL "grpc: failed to
// decompress the received message: ...").
type boundedInflate struct{ encoding.Compressor }

func (b boundedInflate) Decompress(r io.Reader) (io.Reader, error) {
	bound := int64(minInflate)
	// grpc-go hands over the compressed message as a *mem.Reader.
	if rem, ok := r.(interface{ Remaining() int }); ok {
		bound = max(bound, inflateRatio*int64(rem.Remaining()))
	}
	dr, err := b.Compressor.Decompress(r)
	if err != nil {
		return nil, err
	}
	return &inflateReader{r: dr, left: bound, bound: bound}, nil
}

// inflateReader reads an inflating message up to its bound.
type inflateReader struct {
	r           io.Reader
	left, bound int64
}

func (i *inflateReader) Read(p []byte) (int, error) {
	if i.left <= 0 {
		// At the bound: one byte more means the message goes on.
		var one [1]byte
		if n, err := i.r.Read(one[:]); n == 0 {
			return 0, err
		}
		return 0, fmt.Errorf("the message inflates to more than %d bytes, inferd's bound for a compressed message (the larger of %d bytes and %d times its compressed size)", i.bound, minInflate, inflateRatio)
	}
	if int64(len(p)) > i.left {
		p = p[:i.left]
	}
	n, err := i.r.Read(p)
	i.left -= int64(n)
	return n, err
}

// deflate is an encoding.Compressor for Deflate; writers are pooled.
type deflate struct{ writers sync.Pool }

func (*deflate) Name() string { return Deflate }

func (d *deflate) Compress(w io.Writer) (io.WriteCloser, error) {
	if zw, ok := d.writers.Get().(*zlib.Writer); ok {
		zw.Reset(w)
		return &deflateWriter{Writer: zw, pool: &d.writers}, nil
	}
	return &deflateWriter{Writer: zlib.NewWriter(w), pool: &d.writers}, nil
}

func (*deflate) Decompress(r io.Reader) (io.Reader, error) {
	zr, err := zlib.NewReader(r)
	if err != nil {
		return nil, err
	}
	return zr, nil
}

// deflateWriter returns its zlib.Writer to the pool on Close.
type deflateWriter struct {
	*zlib.Writer
	pool *sync.Pool
}

func (w *deflateWriter) Close() error {
	err := w.Writer.Close()
	w.pool.Put(w.Writer)
	return err
}

// Response compression levels (--grpc-infer-response-compression-level).
const (
	CompressionNone   = "none"
	CompressionLow    = "low"
	CompressionMedium = "medium"
	CompressionHigh   = "high"
)

// ValidCompressionLevel reports whether level (any case) is one of none,
// low, medium or high; "" counts as none.
func ValidCompressionLevel(level string) bool {
	switch strings.ToLower(level) {
	case "", CompressionNone, CompressionLow, CompressionMedium, CompressionHigh:
		return true
	}
	return false
}

// compressionRanking is gRPC core's order of algorithms for levels.
var compressionRanking = []string{"gzip", Deflate}

// responseCompressor is the algorithm for level among those the client
// accepts (gRPC core's rule,
// CompressionAlgorithmSet::CompressionAlgorithmForLevel in grpc/grpc
// src/core/lib/compression/compression_internal.cc: low → first, medium →
// middle, high → last of gzip, deflate as accepted), or "identity".
func responseCompressor(level string, accepted []string) string {
	var algos []string
	for _, a := range compressionRanking {
		for _, c := range accepted {
			if strings.EqualFold(strings.TrimSpace(c), a) {
				algos = append(algos, a)
				break
			}
		}
	}
	if len(algos) == 0 {
		return encoding.Identity
	}
	switch level {
	case CompressionLow:
		return algos[0]
	case CompressionMedium:
		return algos[len(algos)/2]
	case CompressionHigh:
		return algos[len(algos)-1]
	}
	return encoding.Identity
}

// setSendCompressor picks the call's response encoding before anything is
// sent: ModelInfer and ModelStreamInfer follow the configured level, every
// other RPC (and level none) answers uncompressed, never mirroring the
// request's encoding as grpc-go would by default (see
// grpc.SetSendCompressor in google.golang.org/grpc).
func (s *Server) setSendCompressor(ctx context.Context, method string) error {
	name := encoding.Identity
	if method == pb.GRPCInferenceService_ModelInfer_FullMethodName || method == pb.GRPCInferenceService_ModelStreamInfer_FullMethodName {
		if s.opts.ResponseCompression != CompressionNone {
			accepted, err := grpc.ClientSupportedCompressors(ctx)
			if err != nil {
				return fmt.Errorf("response compression: %w", err)
			}
			name = responseCompressor(s.opts.ResponseCompression, accepted)
		}
	}
	if err := grpc.SetSendCompressor(ctx, name); err != nil {
		return fmt.Errorf("response compression: %w", err)
	}
	return nil
}

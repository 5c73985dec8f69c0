package perf

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
)

// shmDir is where POSIX shared-memory objects live on Linux: shm_open(3)
// of "/name" opens shmDir+"/name".
const shmDir = "/dev/shm"

// shmRef places one tensor in a registered region.
type shmRef struct {
	region       string
	offset, size int64
}

// shmLayout is --shared-memory system: two objects the tool creates in
// shmDir and registers as two system regions, one holding every prepared
// input tensor one after another, one with a slot for every output. As
// with perf_analyzer, the inputs are written once, before the load, and
// concurrent requests share the output slots (their contents are never
// read).
type shmLayout struct {
	inputs  [][]shmRef // [set][input]
	outputs []shmRef
	objects []shmObject
}

// shmObject is one created object and the region it is registered as.
type shmObject struct {
	region, key, path string
	size              int64
	registered        bool
}

// newShmLayout writes the tensors of every set into a new input object and
// sizes an output object: an output of fixed shape and datatype takes its
// exact size, any other --output-shared-memory-size bytes.
func newShmLayout(o *options, info *modelInfo, sets [][]tensorData) (*shmLayout, error) {
	l := &shmLayout{}
	base := "inferd_perf_" + strconv.Itoa(os.Getpid()) + "_" + strconv.FormatUint(rand.Uint64()>>32, 16)
	var data []byte
	for _, tensors := range sets {
		refs := make([]shmRef, len(tensors))
		for i, t := range tensors {
			refs[i] = shmRef{region: base + "_input", offset: int64(len(data)), size: int64(len(t.raw))}
			data = append(data, t.raw...)
		}
		l.inputs = append(l.inputs, refs)
	}
	var outSize int64
	for _, out := range info.outputs {
		size := outputBytes(out, info.maxBatch, o.batch)
		if size < 0 {
			size = int64(o.outputShmSize)
		}
		l.outputs = append(l.outputs, shmRef{region: base + "_output", offset: outSize, size: size})
		outSize += size
	}
	if err := l.create(base+"_input", data, int64(len(data))); err != nil {
		return nil, err
	}
	if len(info.outputs) > 0 {
		if err := l.create(base+"_output", nil, outSize); err != nil {
			l.remove()
			return nil, err
		}
	}
	return l, nil
}

// outputBytes is the size of one request's output of fixed shape and
// fixed-size datatype; -1 for any other.
func outputBytes(out tensorMeta, maxBatch, batch int) int64 {
	size := int64(elemSize(out.Datatype))
	if size <= 0 {
		return -1
	}
	for _, d := range out.Shape {
		if d < 0 {
			return -1
		}
		size *= d
	}
	if maxBatch > 0 {
		size *= int64(batch)
	}
	return size
}

// create makes the object region of size bytes holding data.
func (l *shmLayout) create(region string, data []byte, size int64) error {
	path := shmDir + "/" + region
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("--shared-memory system: %w", err)
	}
	l.objects = append(l.objects, shmObject{region: region, key: "/" + region, path: path, size: size})
	_, err = f.Write(data)
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--shared-memory system: %s: %w", path, err)
	}
	return nil
}

// register registers every object with the server as a system region.
func (l *shmLayout) register(ctx context.Context, p protocol) error {
	for i := range l.objects {
		ob := &l.objects[i]
		if err := p.registerSystemShm(ctx, ob.region, ob.key, ob.size); err != nil {
			return fmt.Errorf("--shared-memory system: registering region %s: %w", ob.region, err)
		}
		ob.registered = true
	}
	return nil
}

// release unregisters what was registered and removes the objects.
func (l *shmLayout) release(ctx context.Context, p protocol) error {
	var errs []error
	for _, ob := range l.objects {
		if ob.registered {
			if err := p.unregisterSystemShm(ctx, ob.region); err != nil {
				errs = append(errs, fmt.Errorf("unregistering region %s: %w", ob.region, err))
			}
		}
	}
	return errors.Join(append(errs, l.remove())...)
}

func (l *shmLayout) remove() error {
	var errs []error
	for _, ob := range l.objects {
		if err := os.Remove(ob.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

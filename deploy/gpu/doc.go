// Package gpu holds the GPU check bundle: `make gpu-bundle` packs the inferd
// binary, the test binaries of the packages with GPU tests, ONNX Runtime with
// its CUDA and TensorRT providers and the model repository checkrepo writes,
// and check.sh reassembles and runs them on a GPU host without Go or network
// access, writing one report. Its tests are the client half of check.sh's
// end-to-end checks (TestServed) and CI's run of the whole bundle on a
// machine without a GPU (TestCheckWithoutGPU).
package gpu

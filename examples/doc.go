// Package examples holds the example model repositories served by `make run`
// and the code that generates their ONNX models: model_repository/ (ONNX
// models only, the one every container image serves) and python_repository/
// (model.py models, an ensemble and a decoupled model; it needs python3 with
// numpy). The files are checked in so the server runs without a build step;
// a test keeps the generated ones identical to what the generator writes now.
package examples

//go:generate go run ./genmodels -out .

// Package examples holds the example model repository served by `make run`
// (model_repository/) and the code that generates it. The files are checked
// in so the server runs without a build step; a test keeps them identical to
// what the generator writes now.
package examples

//go:generate go run ./genmodels -out model_repository

module github.com/inferd/inferd

go 1.26.8

require (
	github.com/go-chi/chi/v5 v5.5.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/yalue/onnxruntime_go v1.27.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

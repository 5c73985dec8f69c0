// Package deploy holds inferd's container images and deployment recipes:
// Dockerfiles (docker/), SageMaker (sagemaker/), Vertex AI (vertex/), AWS
// Lambda (lambda/) and Kubernetes with KServe (kubernetes/). It has no Go
// code of its own; its tests parse and check those files.
package deploy

"""Tests for image places outside containers (ImageStream tags, CDI registry sources, KubeVirt
containerDisk volumes, the OpenTelemetry operator) and what the platform fills in (OpenShift
ImageChange triggers, Strimzi's build output)."""

from __future__ import annotations

import pytest

from imagecheck.scanning import scan_text

VM = """\
apiVersion: kubevirt.io/v1
kind: VirtualMachine
metadata: {name: vm1}
spec:
  dataVolumeTemplates:
  - metadata: {name: dv1}
    spec:
      source:
        registry:
          url: docker://quay.io/containerdisks/fedora:39
  - metadata: {name: dv2}
    spec:
      source:
        http: {url: "https://example.com/disk.img"}
  template:
    spec:
      volumes:
      - name: cd
        containerDisk:
          image: quay.io/kubevirt/cirros-container-disk-demo
"""
IMAGE_STREAM = """\
apiVersion: image.openshift.io/v1
kind: ImageStream
metadata: {name: is}
spec:
  tags:
  - name: latest
    from: {kind: DockerImage, name: docker.io/library/nginx:1}
  - name: other
    from: {kind: ImageStreamTag, name: is:latest}
"""
DEPLOYMENT_CONFIG = """\
apiVersion: apps.openshift.io/v1
kind: DeploymentConfig
metadata: {name: dc}
spec:
  triggers:
  - type: ImageChange
    imageChangeParams:
      containerNames: [web]
      from: {kind: ImageStreamTag, name: "app:latest"}
  template:
    spec:
      containers:
      - {name: web, image: " "}
      - {name: side, image: busybox}
"""
ANNOTATED = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  annotations:
    image.openshift.io/triggers: >-
      [{"from": {"kind": "ImageStreamTag", "name": "web:1"},
        "fieldPath": "spec.template.spec.containers[?(@.name==\\"web\\")].image"}]
spec:
  template:
    spec:
      containers:
      - {name: web, image: ""}
      - {name: side, image: busybox}
"""
TEMPLATE = (
    '{"kind": "Template", "apiVersion": "template.openshift.io/v1", "objects": [\n'
    + '{"kind": "ImageStream", "apiVersion": "image.openshift.io/v1", "metadata": {"name": "s"},\n'
    + ' "spec": {"tags": [{"name": "1", "from": {"kind": "DockerImage", "name": "redis:7"}}]}}\n'
    + "]}\n"
)
OTEL = """\
apiVersion: opentelemetry.io/v1alpha1
kind: Instrumentation
metadata: {name: i}
spec:
  java: {image: ghcr.io/x/java:1}
  nginx:
    image: ghcr.io/x/nginx:1
---
apiVersion: opentelemetry.io/v1beta1
kind: OpenTelemetryCollector
metadata: {name: c}
spec:
  image: otel/opentelemetry-collector-contrib:0.100.0
  config: {receivers: {}}
"""
STRIMZI = """\
apiVersion: kafka.strimzi.io/v1beta2
kind: KafkaConnect
metadata: {name: kc}
spec:
  image: quay.io/strimzi/kafka:0.40.0-kafka-3.7.0
  build:
    output: {type: docker, image: my-reg.io/org/connect:latest}
"""


@pytest.mark.parametrize(
    ("text", "file", "expected"),
    [
        (
            VM,
            "vm.yaml",
            [
                (10, "VirtualMachine", "dv1", "quay.io/containerdisks/fedora:39", None),
                (20, "VirtualMachine", "cd", "quay.io/kubevirt/cirros-container-disk-demo", None),
            ],
        ),
        (
            IMAGE_STREAM,
            "is.yaml",
            [(7, "ImageStream", "tag latest", "docker.io/library/nginx:1", None)],
        ),
        (
            DEPLOYMENT_CONFIG,
            "dc.yaml",
            [
                (
                    13,
                    "DeploymentConfig",
                    "web",
                    " ",
                    "filled by an OpenShift ImageChange trigger (from app:latest)",
                ),
                (14, "DeploymentConfig", "side", "busybox", None),
            ],
        ),
        (
            ANNOTATED,
            "d.yaml",
            [
                (
                    13,
                    "Deployment",
                    "web",
                    "",
                    "filled by an OpenShift ImageChange trigger (from web:1)",
                ),
                (14, "Deployment", "side", "busybox", None),
            ],
        ),
        (TEMPLATE, "t.json", [(3, "ImageStream", "tag 1", "redis:7", None)]),
        (
            OTEL,
            "otel.yaml",
            [
                (5, "Instrumentation", "spec.java.image", "ghcr.io/x/java:1", None),
                (7, "Instrumentation", "spec.nginx.image", "ghcr.io/x/nginx:1", None),
                (
                    13,
                    "OpenTelemetryCollector",
                    "spec.image",
                    "otel/opentelemetry-collector-contrib:0.100.0",
                    None,
                ),
            ],
        ),
        (
            STRIMZI,
            "kc.yaml",
            [
                (5, "KafkaConnect", "spec.image", "quay.io/strimzi/kafka:0.40.0-kafka-3.7.0", None),
                (
                    7,
                    "KafkaConnect",
                    "spec.build.output.image",
                    "my-reg.io/org/connect:latest",
                    "built by Strimzi",
                ),
            ],
        ),
    ],
    ids=[
        "kubevirt-cdi",
        "imagestream",
        "deploymentconfig",
        "annotation",
        "template",
        "otel",
        "strimzi",
    ],
)
def test_places(
    text: str, file: str, expected: list[tuple[int, str, str, str, str | None]]
) -> None:
    found, problems = scan_text(text, file)
    assert problems == []
    assert [(o.line, o.kind, o.container, o.image, o.skipped) for o in found] == expected


def test_a_trigger_whose_containers_cannot_be_read_fills_them_all() -> None:
    text = ANNOTATED.replace('[?(@.name==\\"web\\")]', "[0]")
    assert text != ANNOTATED
    found, _ = scan_text(text, "d.yaml")
    assert all(o.skipped and o.skipped.startswith("filled by") for o in found)
    broken = ANNOTATED.replace('[{"from"', '[{"from" oops')
    assert broken != ANNOTATED
    found, problems = scan_text(broken, "d.yaml")
    assert problems == [] and [o.skipped for o in found] == [None, None]

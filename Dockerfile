# flashserve images. Two targets:
#   docker build --target cpu -t flashserve:cpu .    Debian 12 slim, CPU backend
#   docker build --target gpu -t flashserve:gpu .    NVIDIA CUDA 13 on Ubuntu 24.04
# Both builders run scripts/install-deps.sh and the same CMake build as the README and CI. The
# model is not in the image: mount it at /models (docs/deploy.md). FLASHSERVE_GIT_COMMIT names
# the commit in `flashserve --version`, GetModelInfo and flashserve_build_info (no .git here).
ARG CUDA_VERSION=13.0.1
ARG FLASHSERVE_GIT_COMMIT=unknown

# ---- CPU ---------------------------------------------------------------------------------
FROM debian:12-slim AS cpu-build
ARG FLASHSERVE_GIT_COMMIT
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=OFF \
      -DFLASHSERVE_BUILD_TESTS=OFF -DFLASHSERVE_BUILD_BENCH=OFF \
      -DFLASHSERVE_GIT_COMMIT="${FLASHSERVE_GIT_COMMIT}" \
 && cmake --build build -j "$(nproc)" --target flashserve flashserve-cli \
 && strip build/bin/flashserve build/bin/flashserve-cli

FROM debian:12-slim AS cpu
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY scripts/install-deps.sh /opt/flashserve/scripts/
RUN bash /opt/flashserve/scripts/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home flashserve
COPY --from=cpu-build /src/build/bin/flashserve /src/build/bin/flashserve-cli /usr/local/bin/
USER 10001:10001
EXPOSE 50051 8000 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["flashserve-cli", "--target", "127.0.0.1:50051", "health", "--service", "flashserve.v1.Generation"]
ENTRYPOINT ["flashserve"]
CMD ["--model=/models/SmolLM2-135M-Instruct.Q4_1.gguf", "--device=auto"]

# ---- GPU ---------------------------------------------------------------------------------
FROM nvidia/cuda:${CUDA_VERSION}-devel-ubuntu24.04 AS gpu-build
ARG FLASHSERVE_GIT_COMMIT
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN bash scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFLASHSERVE_CUDA=ON \
      -DFLASHSERVE_BUILD_TESTS=OFF -DFLASHSERVE_BUILD_BENCH=OFF \
      -DFLASHSERVE_GIT_COMMIT="${FLASHSERVE_GIT_COMMIT}" \
 && cmake --build build -j "$(nproc)" --target flashserve flashserve-cli \
 && strip build/bin/flashserve build/bin/flashserve-cli

FROM nvidia/cuda:${CUDA_VERSION}-runtime-ubuntu24.04 AS gpu
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
COPY scripts/install-deps.sh /opt/flashserve/scripts/
RUN bash /opt/flashserve/scripts/install-deps.sh --runtime && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --no-create-home flashserve
COPY --from=gpu-build /src/build/bin/flashserve /src/build/bin/flashserve-cli /usr/local/bin/
USER 10001:10001
EXPOSE 50051 8000 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
  CMD ["flashserve-cli", "--target", "127.0.0.1:50051", "health", "--service", "flashserve.v1.Generation"]
ENTRYPOINT ["flashserve"]
CMD ["--model=/models/SmolLM2-135M-Instruct.Q4_1.gguf", "--device=auto"]

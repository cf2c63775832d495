# A Pagewire node: the pagewire command on a base image built from Debian packages.
#   ./pagewire --version                      # builds node/target/pagewire.jar
#   deploy/base-image/build-base-image.sh     # builds pagewire/base:bookworm (no registry needed)
#   docker build -t pagewire/node .
# Settings come from PAGEWIRE_* variables (see `pagewire node --list-settings`).
ARG BASE=pagewire/base:bookworm
FROM ${BASE}
COPY node/target/pagewire.jar /opt/pagewire/pagewire.jar
ENV PAGEWIRE_NODE_HOST=0.0.0.0 \
    PAGEWIRE_NODE_PORT=7100 \
    PAGEWIRE_NODE_METRICS_PORT=9464
EXPOSE 7100 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["java", "-jar", "/opt/pagewire/pagewire.jar", "node"]

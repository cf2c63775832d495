package io.pagewire.tools.cli;

import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.pagewire.client.impl.GrpcPagewire;
import java.io.PrintWriter;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Mixin;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code pagewire health}: asks a node's gRPC health service whether it serves, for container
 * health checks and readiness probes (exit 0 when SERVING, 1 otherwise, with one line saying why).
 */
@Command(name = "health", mixinStandardHelpOptions = true,
        description = {"Asks a node's gRPC health service whether it is serving.",
            "Exit status 0 when SERVING, 1 when not serving or unreachable (Docker HEALTHCHECK, Kubernetes probes)."})
final class HealthCommand implements Callable<Integer> {
    @Spec
    CommandSpec spec;

    @Parameters(arity = "0..1", paramLabel = "HOST:PORT", description = "The node (default localhost:7100).", defaultValue = "localhost:7100")
    String target;

    @Option(names = "--service", paramLabel = "NAME",
            description = "A service to ask about (default: the node as a whole), e.g. pagewire.verbs.v1.Verbs.", defaultValue = "")
    String service;

    @Option(names = "--timeout", paramLabel = "SECONDS", description = "How long to wait for the answer.", defaultValue = "3")
    double timeoutSeconds;

    @Option(names = {"-q", "--quiet"}, description = "Print nothing when serving.")
    boolean quiet;

    @Mixin
    ClientSecurityOptions security = new ClientSecurityOptions();

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        ManagedChannel channel = GrpcPagewire.channelBuilder(target, security.security()).build();
        try {
            HealthCheckResponse response = HealthGrpc.newBlockingStub(channel)
                    .withDeadlineAfter((long) (timeoutSeconds * 1e9), TimeUnit.NANOSECONDS)
                    .check(HealthCheckRequest.newBuilder().setService(service).build());
            String what = target + (service.isEmpty() ? "" : " " + service) + ": " + response.getStatus();
            if (response.getStatus() == HealthCheckResponse.ServingStatus.SERVING) {
                if (!quiet) {
                    out.println(what);
                }
                return 0;
            }
            err.println(what);
            return 1;
        } catch (StatusRuntimeException e) {
            err.println(target + ": " + e.getStatus().getCode() + (e.getStatus().getDescription() == null ? "" : " " + e.getStatus().getDescription()));
            return 1;
        } finally {
            channel.shutdownNow();
        }
    }
}

package io.pagewire.client;

/** What a peer needs to reach a region: where it is and its rkey. Share it out of band; keep the rkey secret from others. */
public record RemoteRegion(long address, long length, long rkey) {
}

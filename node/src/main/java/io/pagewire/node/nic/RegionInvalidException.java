package io.pagewire.node.nic;

/** A memory region used after it stopped being usable: deregistered, or its memory freed under it. */
final class RegionInvalidException extends NicException {
    private static final long serialVersionUID = 1L;

    RegionInvalidException(MemoryRegion region) {
        super(region + " is no longer usable: " + region.invalidReason());
    }
}

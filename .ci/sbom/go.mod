module leasehold-sbom

go 1.26.0

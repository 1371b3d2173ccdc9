#!/usr/bin/env bash
# Runs inside LocalStack once it is ready: creates Strata's bucket as
# terraform/modules/bucket configures it (public access blocked, SSE, aborted multipart
# uploads cleaned up). Idempotent.
set -euo pipefail
BUCKET=${STRATA_TEST_BUCKET:-strata}
REGION=${AWS_DEFAULT_REGION:-us-east-1}
if ! awslocal s3api head-bucket --bucket "$BUCKET" 2>/dev/null; then
  awslocal s3api create-bucket --bucket "$BUCKET" --region "$REGION"
fi
awslocal s3api put-public-access-block --bucket "$BUCKET" --public-access-block-configuration \
  BlockPublicAcls=true,IgnorePublicAcls=true,BlockPublicPolicy=true,RestrictPublicBuckets=true
awslocal s3api put-bucket-encryption --bucket "$BUCKET" --server-side-encryption-configuration \
  '{"Rules":[{"ApplyServerSideEncryptionByDefault":{"SSEAlgorithm":"AES256"},"BucketKeyEnabled":true}]}'
awslocal s3api put-bucket-lifecycle-configuration --bucket "$BUCKET" --lifecycle-configuration \
  '{"Rules":[{"ID":"abort-incomplete-multipart-uploads","Status":"Enabled","Filter":{},"AbortIncompleteMultipartUpload":{"DaysAfterInitiation":1}}]}'
echo "strata: bucket $BUCKET ready"

# Strata's object store: immutable segment objects under PREFIX/segments/, written once
# (create-only PUTs, enforced for the nodes by modules/iam) and deleted only by the
# compactor. Versioning is an option (var.versioning): it keeps what a compromised
# compactor role or an operator's mistake deletes, for noncurrent_version_days, at the
# price of storing every compacted-away object that long.

resource "aws_s3_bucket" "this" {
  bucket        = var.name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_ownership_controls" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_public_access_block" "this" {
  bucket                  = aws_s3_bucket.this.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_server_side_encryption_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm     = var.kms_key_arn == null ? "AES256" : "aws:kms"
      kms_master_key_id = var.kms_key_arn
    }
    # One KMS request per bucket key instead of per object.
    bucket_key_enabled = var.kms_key_arn != null
  }
}

resource "aws_s3_bucket_versioning" "this" {
  count  = var.versioning ? 1 : 0
  bucket = aws_s3_bucket.this.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "this" {
  bucket = aws_s3_bucket.this.id
  rule {
    id     = "abort-incomplete-multipart-uploads"
    status = "Enabled"
    filter {}
    abort_incomplete_multipart_upload {
      days_after_initiation = var.abort_multipart_after_days
    }
  }

  # With versioning: a deleted or replaced object's old version is kept this long,
  # then expired, and the delete markers left behind are cleaned up.
  dynamic "rule" {
    for_each = var.versioning ? [var.noncurrent_version_days] : []
    content {
      id     = "expire-noncurrent-versions"
      status = "Enabled"
      filter {}
      noncurrent_version_expiration {
        noncurrent_days = rule.value
      }
      expiration {
        expired_object_delete_marker = true
      }
    }
  }

  depends_on = [aws_s3_bucket_versioning.this]
}

# TLS only.
data "aws_iam_policy_document" "tls_only" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.this.arn,
      "${aws_s3_bucket.this.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "tls_only" {
  bucket = aws_s3_bucket.this.id
  policy = data.aws_iam_policy_document.tls_only.json

  depends_on = [aws_s3_bucket_public_access_block.this]
}

# /readyz checks the bucket with a HEAD of this key. Without s3:ListBucket (which only
# the compactor has), S3 answers 403 rather than 404 for a missing key, so the key must
# exist for writer and reader nodes to report ready.
resource "aws_s3_object" "readyz_probe" {
  bucket  = aws_s3_bucket.this.id
  key     = "${var.prefix}/strata-readyz-probe"
  content = ""
  tags    = var.tags

  depends_on = [aws_s3_bucket_server_side_encryption_configuration.this]
}

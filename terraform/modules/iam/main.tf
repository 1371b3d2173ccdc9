# Least privilege, per role. Segment objects live under PREFIX/segments/.
#
#   node (writer and reader): put new segments, get (and ranged-get) segments, head
#     the readiness probe. No list, no delete: a compromised node cannot erase data
#     or enumerate the bucket. Puts must carry If-None-Match: * (Strata's create-only
#     PUT does; S3 checks the s3:if-none-match condition key), so stolen node
#     credentials cannot overwrite a segment either.
#   compactor: the same, plus list (for the orphan sweep) and delete (for objects
#     past their grace period), both under PREFIX/segments/ only. Only the compactor
#     role gets this policy; with the bucket's versioning on, even its deletes stay
#     recoverable for noncurrent_version_days.

locals {
  segments = "${var.bucket_arn}/${var.prefix}/segments/*"
  probe    = "${var.bucket_arn}/${var.prefix}/strata-readyz-probe"
}

data "aws_iam_policy_document" "node" {
  statement {
    sid       = "PutNewSegmentsOnly"
    actions   = ["s3:PutObject"]
    resources = [local.segments]
    condition {
      test     = "StringEquals"
      variable = "s3:if-none-match"
      values   = ["*"]
    }
  }
  statement {
    sid       = "GetSegments"
    actions   = ["s3:GetObject"]
    resources = [local.segments, local.probe]
  }
  dynamic "statement" {
    for_each = var.kms_key_arn == null ? [] : [var.kms_key_arn]
    content {
      sid       = "UseBucketKey"
      actions   = ["kms:GenerateDataKey", "kms:Decrypt"]
      resources = [statement.value]
    }
  }
}

data "aws_iam_policy_document" "compactor" {
  source_policy_documents = [data.aws_iam_policy_document.node.json]
  statement {
    sid       = "DeleteSegments"
    actions   = ["s3:DeleteObject"]
    resources = [local.segments]
  }
  statement {
    sid       = "ListSegments"
    actions   = ["s3:ListBucket"]
    resources = [var.bucket_arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = ["${var.prefix}/segments/*", "${var.prefix}/segments/"]
    }
  }
}

resource "aws_iam_policy" "node" {
  name        = "${var.name}-node"
  description = "Strata writer and reader nodes: put and get segment objects."
  policy      = data.aws_iam_policy_document.node.json
  tags        = var.tags
}

resource "aws_iam_policy" "compactor" {
  name        = "${var.name}-compactor"
  description = "Strata compactor: put, get, list and delete segment objects."
  policy      = data.aws_iam_policy_document.compactor.json
  tags        = var.tags
}

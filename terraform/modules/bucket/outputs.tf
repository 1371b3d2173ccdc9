output "bucket" {
  description = "The bucket's name."
  value       = aws_s3_bucket.this.id
}

output "bucket_arn" {
  description = "The bucket's ARN."
  value       = aws_s3_bucket.this.arn
}

output "prefix" {
  description = "The key prefix Strata uses."
  value       = var.prefix
}

output "strata_bucket_url" {
  description = "The value for STRATA_BUCKET (--bucket). The region comes from the node's AWS environment."
  value       = "s3://${aws_s3_bucket.this.id}/${var.prefix}"
}

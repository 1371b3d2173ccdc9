# Strata on AWS Lambda with an RDS Postgres catalog behind RDS Proxy: API keys on.
#
#   deploy/build-lambda.sh arm64
#   terraform init && terraform apply -var region=eu-west-1 -var bucket_name=... \
#     -var vpc_id=... -var 'private_subnet_ids=[...]' -var 'route_table_ids=[...]' \
#     -var package_file=../../../bin/strata-lambda-arm64.zip
#   STRATA_API_KEY=$(aws secretsmanager get-secret-value --secret-id "$(terraform output -raw api_keys_secret_arn)" \
#     --query SecretString --output text | cut -d, -f1) ../../../deploy/smoke.sh "$(terraform output -raw url)"

resource "aws_security_group" "functions" {
  name_prefix = "${var.name}-fn-"
  description = "Strata functions"
  vpc_id      = var.vpc_id

  lifecycle {
    create_before_destroy = true
  }
}

resource "aws_vpc_security_group_egress_rule" "functions" {
  security_group_id = aws_security_group.functions.id
  cidr_ipv4         = "0.0.0.0/0"
  ip_protocol       = "-1"
  description       = "Catalog, and S3 through the gateway endpoint"
}

resource "aws_vpc_endpoint" "s3" {
  count             = length(var.route_table_ids) > 0 ? 1 : 0
  vpc_id            = var.vpc_id
  service_name      = "com.amazonaws.${var.region}.s3"
  vpc_endpoint_type = "Gateway"
  route_table_ids   = var.route_table_ids
}

module "bucket" {
  source     = "../../modules/bucket"
  name       = var.bucket_name
  versioning = var.bucket_versioning
}

module "iam" {
  source     = "../../modules/iam"
  name       = var.name
  bucket_arn = module.bucket.bucket_arn
  prefix     = module.bucket.prefix
}

module "catalog" {
  source                    = "../../modules/catalog"
  name                      = var.name
  engine                    = var.catalog_engine
  vpc_id                    = var.vpc_id
  subnet_ids                = var.private_subnet_ids
  client_security_group_ids = [aws_security_group.functions.id]
  enable_proxy              = true
  deletion_protection       = var.deletion_protection
}

module "lambda" {
  source                 = "../../modules/lambda"
  name                   = var.name
  package_file           = var.package_file
  architecture           = var.architecture
  frontend               = var.frontend
  function_url_streaming = var.function_url_streaming
  bucket_url             = module.bucket.strata_bucket_url
  catalog_url            = module.catalog.catalog_url
  catalog_secret_arn     = module.catalog.secret_arn
  node_policy_arn        = module.iam.node_policy_arn
  compactor_policy_arn   = module.iam.compactor_policy_arn
  subnet_ids             = var.private_subnet_ids
  security_group_ids     = [aws_security_group.functions.id]
  api_key_count          = 1
}
